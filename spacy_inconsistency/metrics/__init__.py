"""Metrics as the papers define them.

Library implementations (scikit-learn, scipy, krippendorff) are used wherever
one exists; what no library has (the evidence metrics, the bias score) is
written here.
"""
from .agreement import krippendorff_alpha, majority_label  # noqa: F401
from .bias import bias_z_test, unweighted_bias, weighted_bias  # noqa: F401
from .calibration import (  # noqa: F401
    best_f1_threshold,
    binary_metrics,
    expected_calibration_error,
    plot_reliability,
    reliability_bins,
)
from .classification import binary_scores, mcc_per_class  # noqa: F401
from .evidence import evidence_metrics, evidence_scores, tfidf_cosine, unique_sentences  # noqa: F401
from .rationale import iou_f1, token_prf  # noqa: F401

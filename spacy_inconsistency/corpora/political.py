"""The political inconsistency benchmark (df_gold.csv) as pair Docs and DocBins."""
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from ..errors import Errors
from ..pairs import make_pair_doc
from ..political import LABELS_3, LABELS_5, read_political, to_3_classes


def political_docs(nlp: Language, records: Sequence[Dict[str, Any]], *, n_classes: int = 5) -> List[Doc]:
    """One pair Doc per sample, with the published majority label in doc.cats.

    nlp (Language): Pipeline whose tokenizer is used.
    records (Sequence[Dict]): From `spacy_inconsistency.political.read_political`.
    n_classes (int): 5 or 3.
    RETURNS (List[Doc]): Docs; `doc.user_data["sample"]` is the row index.
    """
    if n_classes not in (3, 5):
        raise ValueError(Errors.E006.format(name="n_classes", expected="3 or 5", value=n_classes))
    labels = LABELS_5 if n_classes == 5 else LABELS_3
    docs = []
    for i, record in enumerate(records):
        gold = record["label_5"] if n_classes == 5 else to_3_classes(record["label_5"])
        if gold not in labels:
            raise ValueError(Errors.E142.format(label=gold, labels=labels))
        doc = make_pair_doc(nlp, record["text_a"], record["text_b"], labels=("A", "B"))
        doc.cats = {label: float(label == gold) for label in labels}
        doc.user_data["sample"] = i
        docs.append(doc)
    return docs


def fold_indices(records: Sequence[Dict[str, Any]], *, n_folds: int = 5, seed: int = 0) -> List[List[int]]:
    """Stratified folds over the published 5-class majority label.

    records (Sequence[Dict]): The samples.
    n_folds (int): Number of folds.
    seed (int): Shuffle seed.
    RETURNS (List[List[int]]): The test indices of each fold.
    """
    from sklearn.model_selection import StratifiedKFold

    y = [r["label_5"] for r in records]
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [sorted(test.tolist()) for _, test in skf.split(y, y)]


def convert_political(
    data: Union[str, Path],
    output_dir: Union[str, Path],
    *,
    n_classes: int = 5,
    n_folds: int = 5,
    seed: int = 0,
    lang: str = "en",
) -> Dict[str, int]:
    """Write `all.spacy` and per fold `fold{k}/train.spacy`, `fold{k}/dev.spacy`.

    The dev set of a fold is its held-out fifth; cross-validated predictions
    are collected from the five dev sets.

    data (Union[str, Path]): df_gold.csv or its folder.
    output_dir (Union[str, Path]): Where to write.
    n_classes (int): 5 or 3.
    n_folds (int): Number of folds.
    seed (int): Fold seed.
    lang (str): spaCy language of the tokenizer.
    RETURNS (Dict[str, int]): Number of Docs per written file.
    """
    import spacy

    nlp = spacy.blank(lang)
    records = read_political(data)
    docs = political_docs(nlp, records, n_classes=n_classes)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    DocBin(docs=docs, store_user_data=True).to_disk(out / "all.spacy")
    written["all.spacy"] = len(docs)
    for k, test in enumerate(fold_indices(records, n_folds=n_folds, seed=seed)):
        held = set(test)
        fold = out / f"fold{k}"
        fold.mkdir(exist_ok=True)
        DocBin(docs=[d for i, d in enumerate(docs) if i not in held], store_user_data=True).to_disk(fold / "train.spacy")
        DocBin(docs=[docs[i] for i in test], store_user_data=True).to_disk(fold / "dev.spacy")
        written[f"fold{k}/train.spacy"] = len(docs) - len(held)
        written[f"fold{k}/dev.spacy"] = len(held)
    return written

import pytest

from spacy_inconsistency.backends.pypi_models import minilm_encoder_path, package_dir


def test_minilm_encoder_is_a_model_directory():
    path = minilm_encoder_path()
    assert (path / "config.json").exists()


def test_missing_package_names_the_pip_package():
    with pytest.raises(OSError, match=r"E013.*pip install not_a_real_pkg_xyz"):
        package_dir("not_a_real_pkg_xyz")

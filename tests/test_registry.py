"""Every entry point in setup.cfg resolves to what its decorator registered."""
import configparser

import pytest
import spacy
from spacy.util import registry

from conftest import ROOT

GROUPS = {
    "spacy_factories": registry.factories,
    "spacy_misc": registry.misc,
    "spacy_scorers": registry.scorers,
    "spacy_architectures": registry.architectures,
    "spacy_readers": registry.readers,
}


def _entry_points():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    section = parser["options.entry_points"]
    for group, reg in GROUPS.items():
        for line in section[group].strip().splitlines():
            name, target = (part.strip() for part in line.split("="))
            yield group, reg, name, target


ENTRY_POINTS = list(_entry_points())


def test_every_group_is_declared():
    groups = {group for group, *_ in ENTRY_POINTS}
    assert groups == set(GROUPS)
    names = {name for _, _, name, _ in ENTRY_POINTS}
    assert {"inconsistency_segmenter", "contradiction_detector", "inconsistency_detector",
            "spacy-inconsistency.NLIBackend.v1"} <= names


@pytest.mark.parametrize("group,reg,name,target", ENTRY_POINTS, ids=[e[2] for e in ENTRY_POINTS])
def test_entry_point_resolves(group, reg, name, target):
    module_name, attr = target.split(":")
    module = __import__(module_name, fromlist=[attr])
    func = getattr(module, attr)
    assert reg.get(name) is func


def test_installed_entry_points_match_setup_cfg():
    from importlib.metadata import entry_points

    for group, _, name, target in ENTRY_POINTS:
        found = {ep.name: ep.value for ep in entry_points(group=group)}
        assert found.get(name) == target, f"{group}:{name} is not installed; reinstall the package"


def test_factories_are_known_to_spacy_without_import():
    nlp = spacy.blank("en")
    factories = [name for group, _, name, _ in ENTRY_POINTS if group == "spacy_factories"]
    assert len(factories) == 7
    for name in factories:
        assert nlp.has_factory(name)

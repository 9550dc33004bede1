"""PrivSynConfig: the paper lab's options are validated fields with the paper's defaults."""

import dataclasses
import json

import pytest

from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import InputError


def test_defaults_are_the_papers_choices_except_those_the_evidence_changed():
    config = PrivSynConfig()
    # issue 22: tree first on a wide table, the paper's DenseMarg on a narrow one
    assert config.selection == "auto"
    assert config.noise == "weighted_gaussian"
    assert config.consistency is True
    # issue 22: GUM and the MRF on a wide table (the closer table kept), GUM on a narrow one
    assert config.synthesis == "auto"
    # benchmarks/defaults.py --study strategy: S3 without isolated links, not S5 with them
    assert config.gum.strategy == "half_half"
    assert config.connect_isolated is False
    assert config.target is None
    assert config.gum.decay_schedule == "step"
    assert config.marginals == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"selection": "mst"}, "unknown selection 'mst'; choose one of auto, densemarg"),
        ({"noise": "equal_cauchy"}, "unknown noise"),
        ({"synthesis": "pgm"}, "unknown synthesis"),
        ({"consistency": "yes"}, "consistency must be True or False"),
        ({"selection": "privbayes", "privbayes_degree": 0}, "privbayes_degree must be >= 1"),
        ({"privbayes_degree": 1.5}, "privbayes_degree must be an integer"),
        ({"selection": "given"}, "needs the attribute sets"),
        ({"marginals": (("a", "b"),)}, "used by selection 'given' only"),
        ({"selection": "given", "marginals": ("ab",)}, "each a sequence of column names"),
        ({"selection": "given", "marginals": "ab"}, "sequence of attribute sets"),
        ({"selection": "given", "marginals": ((1, 2),)}, "column names"),
    ],
)
def test_bad_lab_options_are_refused_with_a_clear_message(kwargs, message):
    with pytest.raises(InputError, match=message):
        PrivSynConfig(**kwargs)


def test_given_marginals_become_tuples_and_the_config_stays_json_ready():
    config = PrivSynConfig(selection="given", marginals=[["age", "sex"], ["income"]])
    assert config.marginals == (("age", "sex"), ("income",))
    assert json.loads(json.dumps(dataclasses.asdict(config)))["marginals"] == [
        ["age", "sex"],
        ["income"],
    ]

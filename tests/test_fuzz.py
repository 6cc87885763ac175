"""The corpus mutation fuzzer (tests/fuzz_corpus.py) at a fixed seed: every mutated net, solver,
shapes file and Caffe log gets a report or one refusal line naming the file, never an internal
error, an escaped exception or a hang, and no case computes for more than a few seconds.

PROTOAUDIT_FUZZ_CASES (default 2000) and PROTOAUDIT_FUZZ_SEED make the run longer or another one;
`python tests/fuzz_corpus.py --cases N --seed S --keep DIR` runs it outside pytest.
"""
import os

import pytest

import fuzz_corpus

CASES = int(os.environ.get("PROTOAUDIT_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("PROTOAUDIT_FUZZ_SEED", "20260101"))


@pytest.mark.slow
def test_mutated_corpus_files_are_reported_or_refused_in_one_line(tmp_path, capsys):
    summary = fuzz_corpus.fuzz(CASES, SEED, str(tmp_path))
    with capsys.disabled():  # the run's figures, for the log of a CI run
        print("\n" + summary.report())
    assert summary.cases == CASES
    assert not summary.failures, summary.report()
    # the mutations reach past the parser: some cases are audited in full, some refused
    assert summary.statuses.get(0, 0) > CASES // 20 and summary.statuses.get(2, 0) > CASES // 2

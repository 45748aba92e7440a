"""The corpus's sequence, decoupled and BLS half (tests/test_corpus.py has the plain half and says what a run must
show); a file of its own so that the two halves run on the two xdist workers at once."""
from tests.test_corpus import run_half


def test_the_corpus_kinds_half_in_one_run_sound_green_broken_red_with_cause(tmp_path):
    run_half(tmp_path, "kinds")

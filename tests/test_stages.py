"""tensorcraft.substitute: one way, in every package, to run a pipeline with a learner's stage."""
import pytest

from tensorcraft import stages


@stages.swappable(name="_test_double")
def double(x):
    return 2 * x


def test_a_stage_runs_the_library_version_outside_a_block():
    assert double(3) == 6
    assert double.library(3) == 6
    assert not stages.substitutions_active()


def test_a_substitute_is_called_inside_the_block_and_undone_after():
    with stages.substitute(_test_double=lambda x: 3 * x):
        assert stages.substitutions_active()
        assert double(3) == 9
        assert double.library(3) == 6
    assert double(3) == 6
    assert not stages.substitutions_active()


def test_blocks_nest_and_an_error_inside_restores_the_outer_substitute():
    with stages.substitute(_test_double=lambda x: 3 * x):
        with pytest.raises(ZeroDivisionError):
            with stages.substitute(_test_double=lambda x: x / 0):
                double(1)
        assert double(3) == 9
    assert double(3) == 6


def test_an_unknown_stage_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"no stage called 'no_such_stage'.*_test_double"):
        with stages.substitute(no_such_stage=lambda x: x):
            pass


def test_a_substitute_must_be_callable():
    with pytest.raises(TypeError, match="must be a function"):
        with stages.substitute(_test_double=3):
            pass


def test_two_stages_cannot_share_a_name():
    with pytest.raises(ValueError, match="two stages are called '_test_double'"):
        @stages.swappable(name="_test_double")
        def other(x):
            return x


def test_the_public_face_exports_substitute():
    import tensorcraft
    assert tensorcraft.substitute is stages.substitute


def test_substitutions_active_can_ignore_named_stages():
    with stages.substitute(_test_double=lambda x: 3 * x):
        assert not stages.substitutions_active(ignoring={"_test_double"})
        assert stages.substitutions_active(ignoring={"something_else"})

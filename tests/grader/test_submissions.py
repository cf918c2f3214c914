"""The folder of submissions: what is found, what is skipped and why, what cannot be read."""
from grader.course import DEFAULT_COURSE
from grader.worker.execute import execute_submission
from grader.worker.job import GradingJob
from grader.instructor.submissions import find_submissions


def test_layout_learner_folder_then_notebook_named_after_its_assignment(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "00_welcome.ipynb").write_text("{}")
    (tmp_path / "alice" / "99_unknown.ipynb").write_text("{}")
    (tmp_path / "bad name!").mkdir()
    (tmp_path / "loose.ipynb").write_text("{}")
    found, skipped = find_submissions(tmp_path, ["00_welcome"])
    assert [(s.learner, s.assignment) for s in found] == [("alice", "00_welcome")]
    assert len(skipped) == 3
    assert any("99_unknown" in line and "no assignment" in line for line in skipped)
    assert any("bad name!" in line for line in skipped)
    assert any("loose.ipynb" in line and "not a learner folder" in line for line in skipped)


def test_an_unreadable_submission_is_reported_not_raised(tmp_path):
    broken = tmp_path / "00_welcome.ipynb"
    broken.write_text("this is not json")
    executed = execute_submission(GradingJob(broken, tmp_path / "out", DEFAULT_COURSE.db_url, "carol", "00_welcome", 5))
    assert executed.problem.startswith(f"{broken} is not a readable notebook")
    assert executed.notebook_json == ""


def test_grading_before_building_says_which_build_command_to_run(tmp_path, capsys):
    from grader.cli import main
    (tmp_path / "submissions" / "alice").mkdir(parents=True)
    assert main(["autograde", str(tmp_path / "submissions"), "--course", str(tmp_path / "course")]) == 2
    assert f"run `python -m grader build --course {tmp_path / 'course'}` first" in capsys.readouterr().err


def test_ctrl_c_during_autograde_says_how_to_resume_without_a_traceback(tmp_path, capsys, monkeypatch):
    import grader.instructor.autograde
    from grader.cli import main
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(grader.instructor.autograde, "autograde", interrupted)
    assert main(["autograde", str(tmp_path)]) == 130
    assert "run the same command again to grade the rest" in capsys.readouterr().err


def test_nbgraders_collected_layout_is_found_with_its_exchange_files(tmp_path):
    for learner in ("alice", "erin"):
        folder = tmp_path / learner / "00_welcome"
        folder.mkdir(parents=True)
        (folder / "00_welcome.ipynb").write_text("{}")
        (folder / "timestamp.txt").write_text("2026-12-03 08:00:00.000000 UTC")
        (folder / "submission_secret.txt").write_text("secret")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "00_welcome.ipynb").write_text("{}")
    (tmp_path / "erin" / "00_welcome.ipynb").write_text("{}")      # handed in in both layouts
    (tmp_path / "carol" / "00_welcome").mkdir(parents=True)         # a folder without its notebook
    (tmp_path / "dave" / "99_unknown").mkdir(parents=True)
    (tmp_path / "dave" / "99_unknown" / "99_unknown.ipynb").write_text("{}")
    found, skipped = find_submissions(tmp_path, ["00_welcome"])
    assert [(s.learner, s.path.relative_to(tmp_path).as_posix()) for s in found] == [
        ("alice", "alice/00_welcome/00_welcome.ipynb"), ("bob", "bob/00_welcome.ipynb"),
        ("erin", "erin/00_welcome/00_welcome.ipynb")]
    assert [c.name for c in found[0].companions] == ["timestamp.txt", "submission_secret.txt"]
    assert found[1].companions == ()
    assert len(skipped) == 3
    assert any("erin/00_welcome.ipynb" in line and "handed in twice" in line for line in skipped)
    assert any("carol/00_welcome" in line and "holds no 00_welcome.ipynb" in line for line in skipped)
    assert any("dave/99_unknown" in line and "no assignment named '99_unknown'" in line for line in skipped)

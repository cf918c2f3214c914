"""nbgrader's autograde chains of preprocessors, as the course's ``nbgrader_config.py`` configures them.

nbgrader's ``autograde`` runs two configurable chains of preprocessors on each submission:
``Autograde.sanitize_preprocessors`` (outputs cleared, locked and test cells restored from the
gradebook) and ``Autograde.autograde_preprocessors`` (execute, filter outputs, save the scores,
assign late penalties). The chains are read here from nbgrader itself, through the course's
config, so that what an instructor sets there (``IgnorePattern.pattern``, ``LimitOutput``,
``ClearMetadataPreprocessor.enabled``, ``LateSubmissionPlugin.penalty_method``, a list of their
own) means the same as under ``nbgrader autograde``. Two substitutions only: nbgrader's Execute
becomes our executor, and the gradebook writers (``SaveAutoGrades``, ``AssignLatePenalties``)
run in the parent process, since SQLite allows one writer at a time.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.converters import Autograde, GenerateFeedback
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, Execute, SaveAutoGrades
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader
from traitlets.utils.importstring import import_item

from ..course import CONFIG_TEMPLATE

# Steps that write to the gradebook: the parent runs them, in their configured order.
GRADEBOOK_WRITERS = (SaveAutoGrades, AssignLatePenalties)
# Steps that may follow the writers because they only check the notebook (nbgrader's default ends
# with CheckCellMetadata); any other step there would change what the writers scored.
CHECKS_ONLY = (CheckCellMetadata,)


class ChainError(ValueError):
    """The configured chain cannot be split between the workers and the parent."""


def course_config(config_file: Path | None = None) -> Config:
    """The nbgrader configuration of a course (default: the repository's grader/nbgrader_config.py)."""
    path = Path(config_file or CONFIG_TEMPLATE).resolve()
    return copy.deepcopy(_load(str(path), path.stat().st_mtime_ns))   # the caller's to change


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int) -> Config:
    file = Path(path)
    return PyFileConfigLoader(file.name, path=str(file.parent)).load_config()


def _instance(step, config: Config) -> Preprocessor:
    """A configured preprocessor from what an nbgrader list may hold: a class, a dotted name, an instance."""
    if isinstance(step, Preprocessor):
        return step
    cls = import_item(step) if isinstance(step, str) else step
    return cls(config=config)


def _class(step) -> type:
    return type(step) if isinstance(step, Preprocessor) else import_item(step) if isinstance(step, str) else step


@dataclass
class Chains:
    """The worker's two chains (configured instances) and the parent's gradebook writers (classes)."""
    sanitize: list[Preprocessor]
    autograde: list[Preprocessor]
    writers: list[type]


def _split(config: Config) -> tuple[list, list, list[type]]:
    """nbgrader's two configured lists, with the gradebook writers taken out of the autograde one."""
    converter = Autograde(config=config)
    sanitize, autograde, writers = list(converter.sanitize_preprocessors), [], []
    for step in sanitize:
        if issubclass(_class(step), GRADEBOOK_WRITERS):
            raise ChainError(f"Autograde.sanitize_preprocessors holds {_class(step).__name__}, which writes "
                                "the gradebook: only autograde_preprocessors may")
    for step in converter.autograde_preprocessors:
        cls = _class(step)
        if issubclass(cls, GRADEBOOK_WRITERS):
            writers.append(cls)
        elif writers and not issubclass(cls, CHECKS_ONLY):
            raise ChainError(f"Autograde.autograde_preprocessors puts {cls.__name__} after the gradebook "
                                f"writers {[w.__name__ for w in writers]}; here the writers run last, in the "
                                "parent process: move it before them")
        else:
            autograde.append(step)
    return sanitize, autograde, writers


def build_chains(config: Config, executor: type[Execute], **executor_kwargs) -> Chains:
    """nbgrader's configured chains with nbgrader's Execute (or the course config's
    ``SandboxedExecute``, any subclass of it) replaced by ``executor`` (built with
    ``executor_kwargs`` over the config, e.g. a --timeout) and the gradebook writers taken out."""
    sanitize, autograde, writers = _split(config)
    return Chains([_instance(step, config) for step in sanitize],
                  [executor(config=config, **executor_kwargs) if issubclass(_class(step), Execute)
                   else _instance(step, config)
                   for step in autograde],
                  writers)


def run(chain: list[Preprocessor], notebook: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
    """Apply each step as nbconvert's exporter does: a step whose ``enabled`` is False is skipped
    (IgnorePattern and ClearMetadataPreprocessor are off unless the config turns them on)."""
    for step in chain:
        notebook, resources = step(notebook, resources)
    return notebook, resources


def gradebook_writers(config: Config) -> list[Preprocessor]:
    """The configured gradebook writers, for the parent to run on each executed notebook."""
    return [cls(config=config) for cls in _split(config)[2]]


def feedback_steps(config: Config) -> tuple[Config, list]:
    """nbgrader's GenerateFeedback settings and preprocessors as the course config sets them:
    the exporter's config (feedback template) and the list of preprocessors, kept only there."""
    converter = GenerateFeedback(config=config)
    return converter.config, list(converter.preprocessors)


def exchange_root(config: Config) -> Path:
    """nbgrader's exchange folder as the config sets it (``c.Exchange.root``), else nbgrader's default."""
    from nbgrader.exchange.default.exchange import Exchange
    root = config.Exchange.root if "root" in config.Exchange else Exchange.class_traits()["root"].default_value
    return Path(root).resolve()


def cell_timeout(config: Config) -> int:
    """Seconds a cell may run while grading: the config's ``Execute.timeout``, else nbgrader's default."""
    return config.Execute.timeout if "timeout" in config.Execute else Execute.class_traits()["timeout"].default_value

"""Precision of applied decisions, from people's labels, with a Wilson 95% interval; and the probation it sets.

Precision counts the labels on a pass's yes verdicts (decisions applied, or held to apply): the share a
person agreed with. A pass is on probation while the whole interval lies below `calibration.min_precision`:
it keeps judging and storing, applies nothing, and the yeses it holds are applied, without asking again,
once labels lift the interval's top to the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import CalibrationConfig
from .labels import Label, latest, read_labels
from .passes import JUDGED_PASSES

# the normal quantile of a two-sided 95% interval
Z95 = 1.959964


def wilson(right: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of right/n; (0, 1) when there is nothing to go on.

    Chosen over the normal approximation because it stays inside 0..1 and is honest at the small
    counts labels come in (0 of 2 is [0.00, 0.66], not [0, 0]).
    """
    if n == 0:
        return 0.0, 1.0
    p, z2 = right / n, z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Precision:
    pass_name: str
    # labels that agree with the judge's yes
    right: int
    # labels on the pass's yes verdicts
    labels: int
    min_precision: float

    @property
    def value(self) -> float | None:
        return self.right / self.labels if self.labels else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.right, self.labels)

    @property
    def probation(self) -> bool:
        return self.labels > 0 and self.interval[1] < self.min_precision

    def phrase(self) -> str:
        """`precision 0.96 [0.80, 0.99] from 24 labels`, or that there are none."""
        if not self.labels:
            return "no labels yet"
        lo, hi = self.interval
        return f"precision {self.value:.2f} [{lo:.2f}, {hi:.2f}] from {self.labels} label{'s' * (self.labels != 1)}"

    def probation_phrase(self) -> str:
        lo, hi = self.interval
        return f"probation (precision {self.value:.2f} [{lo:.2f}, {hi:.2f}] < {self.min_precision:.2f})"

    def json(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {
            "precision": None if self.value is None else round(self.value, 4),
            "low": round(lo, 4),
            "high": round(hi, 4),
            "labels": self.labels,
            "right": self.right,
            "min_precision": self.min_precision,
            "probation": self.probation,
            "text": self.phrase(),
        }


def of_pass(labels: list[Label], pass_name: str, min_precision: float) -> Precision:
    """The pass's precision from the label that counts for each of its yes verdicts."""
    counted = [lab for lab in latest(labels).values() if lab.pass_name == pass_name and lab.is_yes]
    return Precision(pass_name, sum(lab.right for lab in counted), len(counted), min_precision)


def by_pass(root: Path | str, cfg: CalibrationConfig) -> dict[str, Precision]:
    """Each judged pass's precision from the corpus's labels journal."""
    labels = read_labels(root)
    return {name: of_pass(labels, name, cfg.min_precision) for name in JUDGED_PASSES}


def history(labels: list[Label], pass_name: str, min_precision: float) -> list[dict[str, Any]]:
    """The pass's precision after each label on one of its yes verdicts, oldest first (for the report's chart)."""
    counting: dict[str, Label] = {}
    points = []
    for lab in labels:
        if lab.pass_name != pass_name or not lab.is_yes:
            continue
        counting[lab.verdict] = lab
        p = Precision(pass_name, sum(x.right for x in counting.values()), len(counting), min_precision)
        lo, hi = p.interval
        points.append(
            {"at": lab.at, "precision": p.value, "low": lo, "high": hi, "labels": p.labels, "probation": p.probation}
        )
    return points


@dataclass
class Gate:
    """What the labels say about applying a pass's yes verdicts this session."""

    probation: Precision | None  # set: apply nothing
    # yes verdicts a person labelled no: never applied
    refused: set[str]


def gate(root: Path | str, pass_name: str, cfg: CalibrationConfig) -> Gate:
    """Whether the pass may apply its yeses this session, and which of them people refused."""
    labels = read_labels(root)
    p = of_pass(labels, pass_name, cfg.min_precision)
    refused = {lab.verdict for lab in latest(labels).values() if lab.pass_name == pass_name and lab.label == "no"}
    return Gate(p if p.probation else None, refused)


def precision_lines(precisions: dict[str, Precision]) -> list[str]:
    """The `status` section: each pass's precision, and what probation means for it."""
    out = ["precision of applied decisions, from labels (`knomit-judge label`):"]
    for name, p in precisions.items():
        tail = (
            f" - {p.probation_phrase()}: applying nothing until labels lift it; see `knomit-judge inbox`"
            if p.probation
            else ""
        )
        out.append(f"  {name}: {p.phrase()}{tail}")
    return out

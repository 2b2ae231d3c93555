"""The status's record of the current attempt's pods (plan/tracking.py), and its compact form on the wire.

A gang of 10,240 pods recorded one object per pod (name and UID, about 110 bytes each) would take 1.1 MB of the
1.5 MiB etcd allows an object. Most records say no more than "this pod exists (or succeeded)": those whose name is
the only one of its kind in the record are written as name ranges (`worker-0` to `worker-10239` of attempt 1 in a
few dozen bytes) without their UID. A name alone is exact for them: the operator creates a pod under a recorded name
only after that name's record is gone (its failure counted), so while the record lasts the name means one pod.
Records with more to say (a counted failure, which is matched by UID; a first finish time; a restart in place)
stay whole, as does index 0's (rank 0's pod: the last words of a departed pod under its name are taken only from
that pod, by UID). The status's validator unpacks the ranges into records with an empty UID and its serializer
packs them again, so the planner sees one list."""

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from trainingjob.model.base import ApiModel, Int, Str
from trainingjob.model.roles import MAX_PODS

MAX_TRACKED = MAX_PODS
MAX_RANGES = 64
_INT = r"(0|[1-9][0-9]*)"
INDICES = rf"^{_INT}(-{_INT})?(,{_INT}(-{_INT})?)*$"
_NAME = re.compile(rf"^(.*-){_INT}(-[0-9]+)$")  # <job>-<role>-<index>-<attempt>: prefix, index, suffix
_BARE = {"name", "uid", "outcome"}


class PodOutcome(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class TrackedPod(ApiModel):
    """A pod of the current attempt the operator created or saw, so that one that vanishes is noticed and
    every failure is counted exactly once."""

    name: Annotated[Str, Field(max_length=253)]
    """The pod's name."""
    uid: Annotated[Str, Field(max_length=64)]
    """The pod's UID; empty when the record came from trackedPodRanges (the name alone is the pod's)."""
    outcome: PodOutcome | None = None
    """Succeeded, or Failed once its failure was counted; unset while it runs."""
    finished_at: datetime | None = None
    """On the attempt's first pod to succeed only: when it finished (its trainer's end; when the operator first saw
    it succeeded, where the pod did not say). A DDP gang's completion grace counts from it."""
    incarnation: Annotated[Int, Field(ge=2)] | None = None
    """A parameter-server worker whose trainer restarted in place: the incarnation last ordered (2 after its first
    restart in place; its trainer reads TJ_INCARNATION). A failure of an older incarnation is never counted again."""
    restarting_since: datetime | None = None
    """While that restart in place is under way: when it was recorded (the commit point). Cleared once the pod's
    agent runs the incarnation; the pod is re-created if it does not within the operator's inPlaceTimeoutSeconds
    after the worker's backoff."""


class TrackedPodRange(ApiModel):
    """Tracked pods named alike, recorded by name alone: prefix + index + suffix for each index of `indices`."""

    prefix: Annotated[Str, Field(max_length=253)]
    """The names' common start, e.g. `big-worker-`."""
    suffix: Annotated[Str, Field(max_length=32, pattern=r"^-[0-9]+$")]
    """The names' common end: a dash and the attempt the pods were created for, e.g. `-1`."""
    indices: Annotated[Str, Field(max_length=100_000, pattern=INDICES)]
    """The indices, as ascending runs: `0-4095,4097`."""
    outcome: PodOutcome | None = None
    """Succeeded for pods that succeeded; unset while they run."""


def check_unique(records: list[TrackedPod]) -> list[TrackedPod]:
    """No two records of one pod: UIDs unique, and a name recorded without a UID only once."""
    for kind, values in (("uid", [t.uid for t in records if t.uid]), ("name", [t.name for t in records if not t.uid])):
        repeated = sorted(value for value, count in Counter(values).items() if count > 1)
        if repeated:
            raise ValueError(f"duplicate {kind}: {', '.join(repeated)}")
    return records


def indices(text: str, most: int = MAX_TRACKED) -> list[int]:
    """The indices of a range string, ascending; refused if not ascending or more than `most` (never expanded
    unbounded: the status is bookkeeping anyone with status access could write)."""
    found: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        if high < low or (found and low <= found[-1]) or len(found) + high - low + 1 > most:
            raise ValueError(f"indices {text[:64]!r} are not ascending runs of at most {most} indices")
        found.extend(range(low, high + 1))
    return found


def runs(numbers: Iterable[int]) -> str:
    """Ascending numbers as runs: 0-3,5."""
    out: list[str] = []
    ordered = sorted(numbers)
    start = 0
    for i, n in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != n + 1:
            out.append(f"{ordered[start]}-{n}" if n != ordered[start] else str(n))
            start = i + 1
    return ",".join(out)


def unpacked(data: Any) -> Any:
    """A status as written (camelCase or snake_case keys): its range records moved among its records, UID empty."""
    if not isinstance(data, Mapping):
        return data
    key, ranges_key = ("trackedPods", "trackedPodRanges") if "trackedPodRanges" in data else _snake
    ranges = data.get(ranges_key)
    if not isinstance(ranges, list) or not ranges:
        return data
    if len(ranges) > MAX_RANGES:
        raise ValueError(f"{ranges_key}: at most {MAX_RANGES} ranges, not {len(ranges)}")
    records = list(data.get(key) or [])
    for at, item in enumerate(ranges):
        try:
            found, outcome = _names(item, MAX_TRACKED - len(records))
        except ValueError as error:  # pydantic's ValidationError is one
            raise ValueError(f"{ranges_key}[{at}]: {error}") from None
        records += [{"name": name, "uid": "", "outcome": outcome} for name in found]
    records.sort(key=_name_and_uid)  # the planner's order (plan/tracking.py): read back, a record compares equal
    return {**data, key: records, ranges_key: []}


def _names(item: Any, most: int = MAX_TRACKED) -> tuple[list[str], PodOutcome | None]:
    """A range as written: the names it records (at most `most`) and their outcome; ValueError if malformed."""
    r = TrackedPodRange.model_validate(item)
    return [f"{r.prefix}{i}{r.suffix}" for i in indices(r.indices, most)], r.outcome


def _name_and_uid(record: Any) -> tuple[str, str]:
    if isinstance(record, TrackedPod):
        return record.name, record.uid
    return str(record.get("name")), str(record.get("uid"))


_snake = ("tracked_pods", "tracked_pod_ranges")


def packed(data: dict[str, Any]) -> dict[str, Any]:
    """A status as serialized, its bare records (nothing but name, UID and Succeeded) written as name ranges when
    their name is the only one of its kind."""
    key, ranges_key = ("trackedPods", "trackedPodRanges") if "trackedPods" in data else _snake
    records = data.get(key)
    if not records:
        return data
    repeated = {name for name, count in Counter(r["name"] for r in records).items() if count > 1}
    kept: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str | None], list[int]] = {}
    for record in records:
        match = _NAME.match(record["name"])
        if match is None or match[2] == "0" or record["name"] in repeated or not _bare(record):
            kept.append(record)
            continue
        outcome = record.get("outcome")
        groups.setdefault((match[1], match[3], str(outcome) if outcome else None), []).append(int(match[2]))
    ordered = sorted(groups.items(), key=_order)
    ranges = [_range(prefix, suffix, outcome, found) for (prefix, suffix, outcome), found in ordered[:MAX_RANGES]]
    for (prefix, suffix, outcome), found in ordered[MAX_RANGES:]:  # never in practice: a few roles and outcomes
        kept += [{"name": f"{prefix}{i}{suffix}", "uid": "", "outcome": outcome} for i in found]
    packed = {**data, key: kept, ranges_key: ranges}
    return packed if ranges else {k: v for k, v in packed.items() if k != ranges_key}


def _bare(record: Mapping[str, Any]) -> bool:
    said = {k for k, v in record.items() if v is not None}
    return said <= _BARE and record.get("outcome") in (None, PodOutcome.SUCCEEDED)


def _order(item: tuple[tuple[str, str, str | None], list[int]]) -> tuple[str, str, str]:
    (prefix, suffix, outcome), _ = item
    return prefix, suffix, outcome or ""


def _range(prefix: str, suffix: str, outcome: str | None, found: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"prefix": prefix, "suffix": suffix, "indices": runs(found)}
    if outcome is not None:
        out["outcome"] = outcome
    return out


@dataclass(frozen=True)
class Stored:
    """What a stored status's records say, read without validating the whole status (the informer cache asks on
    every list): the UIDs of the pods recorded as running, and the names recorded without a UID, those running
    among them. Malformed parts say nothing."""

    running_uids: frozenset[str]
    running_names: frozenset[str]
    names: frozenset[str]


def stored(status: Any) -> Stored:
    records = status.get("trackedPods") if isinstance(status, Mapping) else None
    ranges = status.get("trackedPodRanges") if isinstance(status, Mapping) else None
    uids, running_names, names = set(), set(), set()
    for t in records if isinstance(records, list) else []:
        if isinstance(t, Mapping) and isinstance(t.get("name"), str):
            if t.get("uid"):
                uids.update([str(t["uid"])] if not t.get("outcome") else [])
                continue
            names.add(t["name"])
            running_names.update([t["name"]] if not t.get("outcome") else [])
    for item in ranges if isinstance(ranges, list) else []:
        try:
            found, outcome = _names(item)
        except ValueError:
            continue
        names.update(found)
        running_names.update(found if outcome is None else [])
    return Stored(frozenset(uids), frozenset(running_names), frozenset(names))

"""Fencing parameter-server workers by incarnation: a worker's old process never pushes as its new one.

A worker that restarts in place (its pod's agent, trainer.agent) runs as incarnation N+1 of the same agent; every
connection's authenticated hello says which agent (TJ_AGENT_ID, random per pod) and incarnation (TJ_INCARNATION) it
speaks for. A server keeps, per worker, the newest it accepted: a hello from the same agent with an older
incarnation is refused, and once a newer one said hello every message on an older connection is refused (a frame
the old process sent before it died and the server reads late included). Another agent (a replacement pod) takes
over the worker. A worker without an agent says ("", 1) on every connection, as before fencing existed.
"""

from dataclasses import dataclass

from trainer.ps_wire import Message, ProtocolError, integer_field

MAX_AGENT_ID = 64


@dataclass(frozen=True)
class Incarnation:
    """Which run of a worker a connection speaks for."""

    agent: str = ""
    number: int = 1

    def __str__(self) -> str:
        return f"incarnation {self.number}" + (f" of agent {self.agent}" if self.agent else "")


def said(message: Message) -> Incarnation:
    """The incarnation a hello names (older workers name none: ("", 1))."""
    agent = message.get("agent", "")
    if not isinstance(agent, str) or len(agent) > MAX_AGENT_ID:
        raise ProtocolError(f"'agent' must be a string of at most {MAX_AGENT_ID} characters")
    number = integer_field(message, "incarnation", 1) if "incarnation" in message else 1
    return Incarnation(agent, number)


def hello_message(worker: int, agent: str, incarnation: int) -> Message:
    """A worker's hello: its index, and (with an agent) which incarnation it is."""
    return {"op": "hello", "worker": worker} | ({"agent": agent, "incarnation": incarnation} if agent else {})


class Fence:
    """The newest incarnation each worker said hello as."""

    def __init__(self) -> None:
        self.newest: dict[int, Incarnation] = {}

    def admit(self, worker: int, incarnation: Incarnation) -> bool:
        """A hello: refused (ProtocolError) if a newer incarnation of the same agent spoke already; True when it
        is a newer incarnation than the one before (a restart in place or a replacement)."""
        known = self.newest.get(worker)
        if known is not None and known.agent and known.agent == incarnation.agent and incarnation.number < known.number:
            raise ProtocolError(f"worker {worker}'s {incarnation} is fenced off: {known} said hello since")
        self.newest[worker] = incarnation
        return known is not None and known != incarnation

    def check(self, worker: int, incarnation: Incarnation | None) -> None:
        """A message on a connection of `incarnation`: refused unless it is the worker's newest."""
        known = self.newest.get(worker)
        if incarnation is not None and known is not None and incarnation != known:
            raise ProtocolError(f"worker {worker}'s {incarnation} is fenced off: {known} said hello since")

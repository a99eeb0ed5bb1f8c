"""The shapes `call_types` matches a task or constructor against: ``TakesN`` (exactly N
positional arguments), ``ThenN`` (N leading positional arguments, then the rest as the
function takes them), and ``GivesN``/``ThenGivesN`` (the same, with ``_results``: what a call
of a task with several results gives). Each is a ``Protocol`` on ``_signature``, the
function's own signature. See `call_types` for why and how.
"""

from __future__ import annotations

from typing import Any, ParamSpec, Protocol, TypeVar

__all__ = [
    "Takes1",
    "Takes2",
    "Takes3",
    "Takes4",
    "Takes5",
    "Takes6",
    "Then1",
    "Then2",
    "Then3",
    "Then4",
    "Then5",
    "Then6",
    "Gives1",
    "Gives2",
    "Gives3",
    "Gives4",
    "Gives5",
    "Gives6",
    "ThenGives1",
    "ThenGives2",
    "ThenGives3",
    "ThenGives4",
    "ThenGives5",
    "ThenGives6",
]

A0_contra = TypeVar("A0_contra", contravariant=True)
A1_contra = TypeVar("A1_contra", contravariant=True)
A2_contra = TypeVar("A2_contra", contravariant=True)
A3_contra = TypeVar("A3_contra", contravariant=True)
A4_contra = TypeVar("A4_contra", contravariant=True)
A5_contra = TypeVar("A5_contra", contravariant=True)
P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)
O_co = TypeVar("O_co", covariant=True)


class Takes1(Protocol[A0_contra, R_co]):
    def _signature(self, a0: A0_contra, /) -> R_co: ...


class Takes2(Protocol[A0_contra, A1_contra, R_co]):
    def _signature(self, a0: A0_contra, a1: A1_contra, /) -> R_co: ...


class Takes3(Protocol[A0_contra, A1_contra, A2_contra, R_co]):
    def _signature(self, a0: A0_contra, a1: A1_contra, a2: A2_contra, /) -> R_co: ...


class Takes4(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, R_co]):
    def _signature(
        self, a0: A0_contra, a1: A1_contra, a2: A2_contra, a3: A3_contra, /
    ) -> R_co: ...


class Takes5(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, R_co]):
    def _signature(
        self, a0: A0_contra, a1: A1_contra, a2: A2_contra, a3: A3_contra, a4: A4_contra, /
    ) -> R_co: ...


class Takes6(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, R_co]):
    def _signature(
        self,
        a0: A0_contra,
        a1: A1_contra,
        a2: A2_contra,
        a3: A3_contra,
        a4: A4_contra,
        a5: A5_contra,
        /,
    ) -> R_co: ...


class Then1(Protocol[A0_contra, P, R_co]):
    def _signature(self, a0: A0_contra, /, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


class Then2(Protocol[A0_contra, A1_contra, P, R_co]):
    def _signature(
        self, a0: A0_contra, a1: A1_contra, /, *args: P.args, **kwargs: P.kwargs
    ) -> R_co: ...


class Then3(Protocol[A0_contra, A1_contra, A2_contra, P, R_co]):
    def _signature(
        self, a0: A0_contra, a1: A1_contra, a2: A2_contra, /, *args: P.args, **kwargs: P.kwargs
    ) -> R_co: ...


class Then4(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, P, R_co]):
    def _signature(
        self,
        a0: A0_contra,
        a1: A1_contra,
        a2: A2_contra,
        a3: A3_contra,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R_co: ...


class Then5(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, P, R_co]):
    def _signature(
        self,
        a0: A0_contra,
        a1: A1_contra,
        a2: A2_contra,
        a3: A3_contra,
        a4: A4_contra,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R_co: ...


class Then6(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, P, R_co]):
    def _signature(
        self,
        a0: A0_contra,
        a1: A1_contra,
        a2: A2_contra,
        a3: A3_contra,
        a4: A4_contra,
        a5: A5_contra,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R_co: ...


class Gives1(Takes1[A0_contra, Any], Protocol[A0_contra, O_co]):
    def _results(self) -> O_co: ...


class Gives2(Takes2[A0_contra, A1_contra, Any], Protocol[A0_contra, A1_contra, O_co]):
    def _results(self) -> O_co: ...


class Gives3(
    Takes3[A0_contra, A1_contra, A2_contra, Any], Protocol[A0_contra, A1_contra, A2_contra, O_co]
):
    def _results(self) -> O_co: ...


class Gives4(
    Takes4[A0_contra, A1_contra, A2_contra, A3_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, O_co],
):
    def _results(self) -> O_co: ...


class Gives5(
    Takes5[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, O_co],
):
    def _results(self) -> O_co: ...


class Gives6(
    Takes6[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, O_co],
):
    def _results(self) -> O_co: ...


class ThenGives1(Then1[A0_contra, P, Any], Protocol[A0_contra, P, O_co]):
    def _results(self) -> O_co: ...


class ThenGives2(Then2[A0_contra, A1_contra, P, Any], Protocol[A0_contra, A1_contra, P, O_co]):
    def _results(self) -> O_co: ...


class ThenGives3(
    Then3[A0_contra, A1_contra, A2_contra, P, Any],
    Protocol[A0_contra, A1_contra, A2_contra, P, O_co],
):
    def _results(self) -> O_co: ...


class ThenGives4(
    Then4[A0_contra, A1_contra, A2_contra, A3_contra, P, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, P, O_co],
):
    def _results(self) -> O_co: ...


class ThenGives5(
    Then5[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, P, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, P, O_co],
):
    def _results(self) -> O_co: ...


class ThenGives6(
    Then6[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, P, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, P, O_co],
):
    def _results(self) -> O_co: ...

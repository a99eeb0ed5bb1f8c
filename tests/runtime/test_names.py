"""What this process calls its IDs (`dista_runtime._values.names`): the labels its driver
tells the head, and the names errors use instead of hashes."""

from __future__ import annotations

import functools

import dista_proto as dp
from dista_runtime._values import names
from dista_runtime._values.errors import error_from_message
from dista_runtime._values.registry import BY_VALUE_ID, pickle_function


def crunch(x: int) -> int:
    return x + 1


def test_a_function_pickled_by_value_is_labelled_by_its_digest() -> None:
    digest, _ = pickle_function(crunch)
    labels = dict(names.entries())
    assert labels[dp.function_id(BY_VALUE_ID, digest, -1)] == f"{__name__}.crunch"


def test_labels_name_partials_and_carried_labels() -> None:
    assert names.label_of(functools.partial(crunch, 1)) == f"{__name__}.crunch"

    def chunk() -> None:
        pass

    setattr(chunk, names.LABEL_ATTRIBUTE, "mine.f (in chunks)")
    assert names.label_of(chunk) == "mine.f (in chunks)"


def test_the_first_label_stays_and_the_generation_moves() -> None:
    before = names.generation()
    names.add(0x5EED0001, "app.first")
    names.add(0x5EED0001, "app.second")
    assert dict(names.entries())[0x5EED0001] == "app.first"
    assert names.generation() == before + 1


def test_an_actor_type_in_an_error_reads_as_its_class() -> None:
    names.add(0x8DB4, "app.Counter")
    error = error_from_message(
        "LookupError: actor type 0x8db4 is not registered on this worker: start the worker "
        "with --import of the module that defines it",
        0,
    )
    assert "actor class app.Counter is not registered on this worker" in str(error)
    unknown = error_from_message("LookupError: actor type 0x77 is not registered", 0)
    assert "actor type 0x77" in str(unknown)

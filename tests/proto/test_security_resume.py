"""A resume proves it is the same driver; grants name the fetcher by its token
(docs/protocol.md, "Security rules" and "Extensions: fetch grants"): the head's rules, in
memory, frame by frame."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net, Raw

KEY = b"k" * 32
EPOCH = 0x51
ALICE = b"a" * 32  # certificate identities (SHA-256 of the DER)
MALLORY = b"m" * 32


def net(stable: bool = False, epoch: int = EPOCH) -> Net:
    n = Net(resume_key=KEY, resume_key_stable=stable)  # type: ignore[arg-type]
    if epoch != EPOCH:
        n.head = dp.Head(epoch=epoch, first_number=1, resume_key=KEY, resume_key_stable=stable)
    return n


def connect(n: Net, identity: bytes = b"", subject: str = "") -> Raw:
    peer = n.connect()
    if identity:
        assert n.head.authenticated(peer.link, frozenset({"driver"}), identity, subject)
    return peer


def hello(peer: Raw, resume: dp.Resume | None = None, mark: int = dp.HELLO_SECRET) -> dp.Event:
    peer.send(dp.Hello(F.ROLE_DRIVER, REGISTRY, None, resume, mark))
    (answer,) = peer.take()
    return answer


def new_driver(
    n: Net, identity: bytes = b"", mark: int = dp.HELLO_SECRET
) -> tuple[Raw, dp.Welcome]:
    peer = connect(n, identity, "CN=alice")
    welcome = hello(peer, mark=mark)
    assert isinstance(welcome, dp.Welcome), welcome
    peer.number = welcome.number
    return peer, welcome


def refused(answer: dp.Event, peer: Raw, number: int, why: str) -> None:
    assert isinstance(answer, dp.Error) and answer.object_id == 0, answer
    assert f"cannot resume driver {number}: {why}" in answer.message
    assert peer.closed is not None and peer.closed.startswith(dp.RESUME_REFUSED)


def test_a_driver_asking_for_a_secret_gets_one_bound_to_its_certificate() -> None:
    n = net()
    _, welcome = new_driver(n, ALICE)
    expected = dp.Credentials(KEY, epoch=EPOCH, stable=False).secret(EPOCH, welcome.number, ALICE)
    assert welcome.secret == expected and len(expected) == dp.SECRET_SIZE
    _, page_only = new_driver(n, ALICE, mark=0)
    assert page_only.secret == b""  # the page's 16-byte welcome


def test_a_resume_without_the_secret_is_refused_and_the_driver_keeps_everything() -> None:
    n = net()
    alice, welcome = new_driver(n, ALICE)
    alice.send(dp.Task(alice.oid(1), 5, b"argument"))
    for identity, secret, why in [
        (MALLORY, b"", "another certificate holds that number"),
        (MALLORY, welcome.secret, "another certificate holds that number"),
        (ALICE, b"", "the resume carries no secret, and that driver was given one"),
        (ALICE, b"x" * 16, "the secret does not match"),
        (b"", b"x" * 16, "another certificate holds that number"),
    ]:
        mallory = connect(n, identity, "CN=mallory")
        answer = hello(mallory, dp.Resume(welcome.number, EPOCH, secret))
        refused(answer, mallory, welcome.number, why)
        if identity:
            assert "by certificate CN=mallory" in (mallory.closed or "")
    assert alice.closed is None  # still connected, still the owner
    alice.send(dp.Cancel(alice.oid(1)))
    (cancelled,) = alice.take()
    assert isinstance(cancelled, dp.Error) and cancelled.object_id == alice.oid(1)
    # Its own resume, on a new connection, takes over.
    again = connect(n, ALICE)
    answer = hello(again, dp.Resume(welcome.number, EPOCH, welcome.secret))
    assert answer == dp.Welcome(welcome.number, EPOCH, welcome.secret)
    assert alice.closed is not None


def test_a_page_only_driver_resumes_from_its_own_certificate_only() -> None:
    n = net()
    _, welcome = new_driver(n, ALICE, mark=0)
    mallory = connect(n, MALLORY)
    refused(hello(mallory, dp.Resume(welcome.number, EPOCH), mark=0), mallory, welcome.number,
            "another certificate holds that number")  # fmt: skip
    again = connect(n, ALICE)
    assert hello(again, dp.Resume(welcome.number, EPOCH), mark=0) == dp.Welcome(
        welcome.number, EPOCH
    )


def test_a_head_with_a_stable_key_checks_another_epochs_secret() -> None:
    old = net(stable=True)
    _, welcome = new_driver(old, ALICE)
    new = net(stable=True, epoch=0x99)
    for identity, secret, why in [
        (MALLORY, welcome.secret, "the secret does not match"),
        (ALICE, b"x" * 16, "the secret does not match"),
        (ALICE, b"", "the resume carries no secret"),
    ]:
        peer = connect(new, identity)
        refused(hello(peer, dp.Resume(welcome.number, EPOCH, secret)), peer, welcome.number, why)
    alice = connect(new, ALICE)
    answer = hello(alice, dp.Resume(welcome.number, EPOCH, welcome.secret))
    assert answer == dp.Welcome(welcome.number, 0x99, welcome.secret)


def test_without_a_stable_key_the_first_resumer_keeps_the_number() -> None:
    old = net()
    _, welcome = new_driver(old, b"")
    new = net(epoch=0x99)
    first = connect(new)
    answer = hello(first, dp.Resume(welcome.number, EPOCH, welcome.secret))
    assert answer == dp.Welcome(welcome.number, 0x99, welcome.secret)
    second = connect(new)
    refused(hello(second, dp.Resume(welcome.number, EPOCH, b"y" * 16)), second,
            welcome.number, "the secret does not match")  # fmt: skip
    third = connect(new)
    refused(hello(third, dp.Resume(welcome.number, EPOCH), mark=0), third, welcome.number,
            "the resume carries no secret, and that driver was given one")  # fmt: skip


# -- grants by token ---------------------------------------------------------------------------


def stored_object(n: Net, driver: Raw) -> tuple[Raw, list[dp.Event]]:
    """A worker runs ``driver``'s task and stores the result: what the worker then gets."""
    worker = n.worker()
    worker.take()
    driver.send(dp.Task(driver.oid(1), 5, b"argument"))
    worker.take()
    worker.send(dp.Stored(driver.oid(1), 1 << 20))
    return worker, worker.take()


def test_a_driver_with_a_secret_is_granted_by_its_token() -> None:
    n = net()
    alice, welcome = new_driver(n, ALICE)
    _, grants = stored_object(n, alice)
    (grant,) = [g for g in grants if isinstance(g, dp.Located)]
    assert grant.token == dp.fetch_token(welcome.secret) and len(grant.token) == dp.TOKEN_SIZE
    assert [type(e) for e in alice.take()] == [dp.Located]  # the location, no token
    assert dp.encode_event(grant, from_head=True)[:4] == (17 + 12 + 16).to_bytes(4, "little")


def test_a_page_only_driver_is_granted_by_its_host() -> None:
    n = net()
    alice, _ = new_driver(n, ALICE, mark=0)
    n.head.peer(alice.link, "10.0.0.9")
    _, grants = stored_object(n, alice)
    (grant,) = [g for g in grants if isinstance(g, dp.Located)]
    assert grant.token == b"" and grant.address == dp.Address("10.0.0.9", 0)


def test_status_hands_out_nothing_a_resume_needs() -> None:
    n = net()
    _, welcome = new_driver(n, ALICE)
    observer = n.connect()
    observer.send(dp.Hello(F.ROLE_OBSERVER, 0), dp.Status())
    (reply,) = observer.take()
    assert isinstance(reply, dp.Status) and reply.text is not None
    assert f"driver {welcome.number}" in reply.text  # the number and epoch are no secret
    for form in (welcome.secret.hex(), welcome.secret.hex().upper(), str(welcome.secret)):
        assert form not in reply.text
    token = dp.fetch_token(welcome.secret)
    assert token.hex() not in reply.text

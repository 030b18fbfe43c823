"""SCRAM on the broker without a network: RFC 7677's example exchange, refusals, the credential store."""

from __future__ import annotations

import base64
import hashlib
import io

import pytest

from broker.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramExchange,
    ScramStore,
    credential_from_password,
    parse_add_scram,
)

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def rfc_store(tmp_path=None) -> ScramStore:
    store = ScramStore(None if tmp_path is None else tmp_path / "scram.json")
    store.apply([("user", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "pencil", 4096, SALT))], [])
    store.saved.result(10)  # written off the caller's thread
    return store


def test_the_rfc_7677_example_exchange():
    exchange = ScramExchange("SCRAM-SHA-256", rfc_store(), server_nonce=SERVER_NONCE)
    assert exchange.first(CLIENT_FIRST) == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert exchange.final(CLIENT_FINAL) == ("user", b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.parametrize("final", [
    CLIENT_FINAL.replace(b"p=dHzb", b"p=eHzb"),  # a wrong proof
    CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"),  # a nonce that is not the one agreed
    CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding that does not match the gs2 header
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",  # no proof at all
    b"\xff\xfe garbage",
])
def test_wrong_final_messages_fail(final):
    exchange = ScramExchange("SCRAM-SHA-256", rfc_store(), server_nonce=SERVER_NONCE)
    exchange.first(CLIENT_FIRST)
    with pytest.raises(ScramError):
        exchange.final(final)


@pytest.mark.parametrize("first", [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user", b"garbage",
                                   b"n,a=admin,n=user,r=abc", b"n,,n=user,r=abc,tokenauth=true", b"\xff"])
def test_wrong_first_messages_fail(first):
    with pytest.raises(ScramError):
        ScramExchange("SCRAM-SHA-256", rfc_store()).first(first)


def test_an_unknown_user_fails_only_at_the_proof_with_a_stable_salt():
    answers = [ScramExchange("SCRAM-SHA-256", rfc_store()).first(b"n,,n=nobody,r=abc") for _ in range(2)]
    salts = {answer.split(b",s=")[1].split(b",")[0] for answer in answers}
    assert len(salts) == 1  # asking twice does not reveal that the user is made up
    exchange = ScramExchange("SCRAM-SHA-256", rfc_store(), server_nonce="xyz")
    exchange.first(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramError):
        exchange.final(b"c=biws,r=abcxyz,p=" + base64.b64encode(bytes(32)))


def test_an_unknown_user_costs_no_key_derivation_and_keeps_its_salt_across_restarts(tmp_path, monkeypatch):
    rfc_store(tmp_path)

    def derive(*args):
        raise AssertionError("a key was derived from a password for an unknown user")

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", derive)
    answers = [ScramExchange("SCRAM-SHA-256", ScramStore(tmp_path / "scram.json")).first(b"n,,n=nobody,r=abc")
               for _ in range(2)]  # each store a restart: it reads its key back
    salt, iterations = answers[0].split(b",s=")[1].split(b",i=")
    assert answers[1].split(b",s=")[1] == salt + b",i=" + iterations and iterations == b"4096"
    assert len(base64.b64decode(salt)) == 32  # as long as a real user's
    other = ScramExchange("SCRAM-SHA-256", ScramStore(tmp_path / "scram.json")).first(b"n,,n=someone,r=abc")
    assert other.split(b",s=")[1].split(b",")[0] != salt
    assert (tmp_path / "scram-server.key").stat().st_mode & 0o777 == 0o600
    exchange = ScramExchange("SCRAM-SHA-256", ScramStore(tmp_path / "scram.json"), server_nonce="xyz")
    exchange.first(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramError, match="^invalid credentials$"):  # what a wrong password gets
        exchange.final(b"c=biws,r=abcxyz,p=" + base64.b64encode(bytes(32)))
    # a server key given (a cluster's, the same on every broker) makes the salts
    given = [ScramExchange("SCRAM-SHA-512", ScramStore(None, b"k" * 32)).first(b"n,,n=nobody,r=abc")
             for _ in range(2)]
    assert given[0].split(b",s=")[1] == given[1].split(b",s=")[1]


def test_the_store_keeps_no_passwords_and_survives_a_reload(tmp_path):
    rfc_store(tmp_path)
    text = (tmp_path / "scram.json").read_text()
    assert "pencil" not in text
    again = ScramStore(tmp_path / "scram.json")
    assert again.users() == {"user": {"SCRAM-SHA-256": 4096}}
    exchange = ScramExchange("SCRAM-SHA-256", again, server_nonce=SERVER_NONCE)
    exchange.first(CLIENT_FIRST)
    assert exchange.final(CLIENT_FINAL)[0] == "user"
    again.apply([], [("user", "SCRAM-SHA-256")])
    again.saved.result(10)
    assert ScramStore(tmp_path / "scram.json").users() == {}


def logs_in(credential: ScramCredential, mechanism: str, password: str) -> bool:
    return credential == credential_from_password(mechanism, password, credential.iterations, credential.salt)


def test_add_scram_takes_kafka_storage_syntax_with_the_password_from_a_file_stdin_or_the_environment(tmp_path):
    secret_file = tmp_path / "alice.password"
    secret_file.write_text("alice-secret\n")
    user, mechanism, credential = parse_add_scram(
        f"SCRAM-SHA-512=[name=alice,password-file={secret_file},iterations=8192]", {}, io.StringIO())
    assert (user, mechanism, credential.iterations, len(credential.stored_key)) == ("alice", "SCRAM-SHA-512", 8192, 64)
    assert logs_in(credential, mechanism, "alice-secret")
    _, _, credential = parse_add_scram("SCRAM-SHA-256=[name=bob,password-env=BOB_PASSWORD]",
                                       {"BOB_PASSWORD": "bob secret, with a comma"}, io.StringIO())
    assert logs_in(credential, "SCRAM-SHA-256", "bob secret, with a comma")
    stdin = io.StringIO("first\nsecond\n")
    for expected in ("first", "second"):
        _, _, credential = parse_add_scram("SCRAM-SHA-256=[name=carol,password-file=-]", {}, stdin)
        assert logs_in(credential, "SCRAM-SHA-256", expected)


def test_a_password_on_the_command_line_is_refused_without_repeating_it():
    with pytest.raises(ValueError, match="visible to every user") as refused:
        parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]", {"X": "y"}, io.StringIO("z\n"))
    assert "alice-secret" not in str(refused.value) and "password-file=" in str(refused.value)


@pytest.mark.parametrize(("text", "message"), [
    ("SCRAM-SHA-1=[name=a,password-env=P]", "expected SCRAM-SHA-256"),
    ("SCRAM-SHA-256=[name=a]", "one of password-file= or password-env="),
    ("SCRAM-SHA-256=[name=a,password-env=P,password-file=-]", "one of password-file= or password-env="),
    ("SCRAM-SHA-256=[name=a,password-env=P,x=1]", "not x"),
    ("SCRAM-SHA-256=[name=a,password-env=P,iterations=100]", "iterations must be between"),
    ("SCRAM-SHA-256=[name=a,password-env=NOT_SET]", "password-env=NOT_SET: no such environment variable"),
    ("SCRAM-SHA-256=[name=a,password-env=EMPTY]", "is empty"),
    ("SCRAM-SHA-256=[name=a,password-file=/nonexistent/password]", "No such file"),
    ("SCRAM-SHA-256=[name=a,password-file=-]", "is empty"),
])
def test_add_scram_refusals(text, message):
    with pytest.raises(ValueError, match=message):
        parse_add_scram(text, {"P": "p", "EMPTY": ""}, io.StringIO(""))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_client_side_logs_in_to_the_server_side(mechanism):
    store = ScramStore(None)
    store.apply([("broker", mechanism, credential_from_password(mechanism, "s3cret", 4096))], [])
    client, server = ScramClient(mechanism, "broker", "s3cret"), ScramExchange(mechanism, store)
    server_first = server.first(client.first())
    user, server_final = server.final(client.final(server_first))
    assert user == "broker"
    client.verify(server_final)
    impostor = ScramClient(mechanism, "broker", "s3cret")
    impostor.final(ScramExchange(mechanism, ScramStore(None)).first(impostor.first()))
    with pytest.raises(ScramError, match="signature does not match"):
        impostor.verify(server_final)  # another exchange's signature: not from a server that knows the password

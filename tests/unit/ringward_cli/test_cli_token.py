"""`ringward token` prints Cassandra's token of a partition key as a bare integer on its last line."""

from __future__ import annotations

import pytest
from ringward.tokens import token_for
from ringward_cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["token", *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_seed_int_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "--type", "int", "1")
    assert code == 0
    assert lines[-1] == "-4069959284402364209"  # app_id = 1 in the seed article


def test_negative_value_after_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "--type", "bigint", "--", "-42")
    assert code == 0
    assert int(lines[-1]) == token_for([-42], ["bigint"])


def test_composite_key_with_show_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "--type", "int", "--type", "text", "--show-key", "--", "-1", "-x")
    assert code == 0
    assert lines[0] == "key: 0x" + "0004ffffffff00" + "00022d7800"
    assert int(lines[-1]) == token_for([-1, "-x"], ["int", "text"])


def test_blob_value(capsys: pytest.CaptureFixture[str]) -> None:
    _, lines, _ = run(capsys, "--type", "blob", "0xCAFE")
    assert int(lines[-1]) == token_for([b"\xca\xfe"], ["blob"])


def test_unknown_type_is_refused_with_the_supported_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, "--type", "decimal", "1")
    assert code == 2
    assert lines == []
    assert "decimal" in err and "bigint" in err


def test_value_count_must_match_types(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--type", "int", "1", "2")
    assert code == 2
    assert "one value per partition key column" in err


def test_type_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["token", "1"])
    assert exited.value.code == 2
    assert "--type" in capsys.readouterr().err

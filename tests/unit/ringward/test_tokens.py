"""Murmur3 tokens of partition keys must equal what Cassandra's `SELECT token(...)` returns."""

from __future__ import annotations

import ipaddress
import math
import struct
import uuid
from datetime import UTC, date, datetime

import mmh3
import pytest
from cassandra import cqltypes
from cassandra.cmurmur3 import murmur3 as driver_murmur3
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement
from hypothesis import given
from hypothesis import strategies as st
from ringward._murmur3 import cassandra_h1, cassandra_hash3_x64_128, mmh3_agrees
from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN
from ringward.tokens import (
    SUPPORTED_TYPES,
    composite_key,
    murmur3_token,
    partition_key,
    serialize,
    token_for,
    token_of_text,
)

# Tokens of raw keys, from the DataStax drivers' test suites: datastax/python-driver
# tests/unit/test_metadata.py (Murmur3TokensTest._verify_hash) and datastax/ruby-driver
# spec/cassandra/murmur3_spec.rb. Several have tail bytes >= 0x80, where Cassandra's hash
# sign-extends and differs from the reference MurmurHash3.
DRIVER_VECTORS = [
    (b"123", -7468325962851647638),
    (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
    (b"\xfe" * 8, -8927430733708461935),
    (b"\x10" * 8, 1446172840243228796),
    (b"9223372036854775807", 7162290910810015547),
    (bytes(range(1, 17)), -5563837382979743776),
    (bytes(range(2, 18)), -1513403162740402161),
    (bytes(range(7, 23)), 8228893370679682632),
    (b"\x00" * 16, 5457549051747178710),
    (b"\xff" * 16, -2824192546314762522),
    (b"\xfe" * 16, -833317529301936754),
    (b"\x00\x01\x02\x03" + b"\xff" * 12, 6463632673159404390),
    (b"\xfe" * 17, -1672437813826982685),
    (b"\xfe\xfe\xfe\xfe", 4566408979886474012),
    (b"\x00\x00\x00\x00", -3485513579396041028),
    (b"\x00\x01\x7f\x7f", 6573459401642635627),
    (b"\x00\xff\xff\xff", 123573637386978882),
    (b"\xff\x01\x02\x03", -2839127690952877842),
    (b"\xe2\xe7", -8582699461035929883),
    (b"\xe2\xe7\xe2\xe7\xe2\xe7\x01", 2222373981930033306),
]


class TestSeedValues:
    # From the seed article (shared/seeds/000): `app_id int` partition key, Murmur3Partitioner#getToken.
    def test_int_key_1(self) -> None:
        assert token_for([1], ["int"]) == -4069959284402364209

    def test_int_key_6(self) -> None:
        assert token_for([6], ["int"]) == 2705480034054113608

    def test_text_form_gives_the_same_token(self) -> None:
        assert token_of_text(["1"], ["int"]) == -4069959284402364209


class TestHash:
    @pytest.mark.parametrize(("key", "expected"), DRIVER_VECTORS)
    def test_pure_implementation_matches_driver_vectors(self, key: bytes, expected: int) -> None:
        assert cassandra_hash3_x64_128(key)[0] == expected

    @pytest.mark.parametrize(("key", "expected"), DRIVER_VECTORS)
    def test_token_matches_driver_vectors(self, key: bytes, expected: int) -> None:
        assert murmur3_token(key) == expected

    def test_mmh3_differs_when_a_tail_byte_is_high(self) -> None:
        key = b"\xfe" * 8
        assert not mmh3_agrees(key)
        assert mmh3.hash64(key, 0, True)[0] != -8927430733708461935
        assert cassandra_h1(key) == -8927430733708461935

    def test_high_bytes_in_the_body_do_not_matter(self) -> None:
        assert mmh3_agrees(b"\xff" * 16 + b"\x01")
        assert not mmh3_agrees(b"\x01" * 16 + b"\xff")

    @given(st.binary(max_size=80))
    def test_pure_equals_mmh3_without_high_tail_bytes(self, key: bytes) -> None:
        body = len(key) - len(key) % 16
        key = key[:body] + bytes(b & 0x7F for b in key[body:])
        assert mmh3_agrees(key)
        assert cassandra_hash3_x64_128(key)[0] == mmh3.hash64(key, 0, True)[0]

    @given(st.binary(min_size=1, max_size=80))
    def test_pure_equals_the_python_drivers_c_murmur3(self, key: bytes) -> None:
        # cassandra-driver's cmurmur3 is an independent implementation of Cassandra's variant.
        assert cassandra_hash3_x64_128(key)[0] == driver_murmur3(key)
        assert cassandra_h1(key) == driver_murmur3(key)

    def test_second_half_is_returned_too(self) -> None:
        key = b"\x01\x02\x03"
        assert cassandra_hash3_x64_128(key)[1] == mmh3.hash64(key, 0, True)[1]

    def test_empty_key_has_the_minimum_token(self) -> None:
        # Murmur3Partitioner.getToken: key.remaining() == 0 -> MINIMUM.
        assert murmur3_token(b"") == MIN_TOKEN

    def test_normalize_maps_minimum_to_maximum(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import ringward.tokens as tokens_module

        monkeypatch.setattr(tokens_module, "cassandra_h1", lambda key: MIN_TOKEN)
        assert tokens_module.murmur3_token(b"x") == MAX_TOKEN


class TestSerialize:
    @pytest.mark.parametrize(
        ("value", "cql", "expected"),
        [
            (1, "int", b"\x00\x00\x00\x01"),
            (-1, "int", b"\xff\xff\xff\xff"),
            (1, "bigint", b"\x00" * 7 + b"\x01"),
            (-2, "smallint", b"\xff\xfe"),
            (127, "tinyint", b"\x7f"),
            (0, "varint", b"\x00"),
            (128, "varint", b"\x00\x80"),
            (-128, "varint", b"\x80"),
            (-129, "varint", b"\xff\x7f"),
            ("héllo", "text", "héllo".encode()),
            ("abc", "ascii", b"abc"),
            (True, "boolean", b"\x01"),
            (False, "boolean", b"\x00"),
            (1.0, "double", struct.pack(">d", 1.0)),
            (1.5, "float", struct.pack(">f", 1.5)),
            (b"\xca\xfe", "blob", b"\xca\xfe"),
            ("127.0.0.2", "inet", b"\x7f\x00\x00\x02"),
            ("::1", "inet", b"\x00" * 15 + b"\x01"),
            (date(1970, 1, 1), "date", b"\x80\x00\x00\x00"),
            (date(1969, 12, 31), "date", b"\x7f\xff\xff\xff"),
            (2**31 + 1, "date", b"\x80\x00\x00\x01"),
            (datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "timestamp", (1000).to_bytes(8, "big")),
            (datetime(1970, 1, 1, 0, 0, 1), "timestamp", (1000).to_bytes(8, "big")),
            (-1, "timestamp", b"\xff" * 8),
        ],
    )
    def test_native_serialization(self, value: object, cql: str, expected: bytes) -> None:
        assert serialize(value, cql) == expected

    def test_uuid_and_timeuuid_are_16_raw_bytes(self) -> None:
        time_based = uuid.uuid1()
        assert serialize(time_based, "timeuuid") == time_based.bytes
        assert serialize(str(time_based), "uuid") == time_based.bytes

    def test_timeuuid_refuses_a_random_uuid(self) -> None:
        with pytest.raises(ConfigurationError, match="version 4"):
            serialize(uuid.uuid4(), "timeuuid")

    def test_nan_is_javas_canonical_nan(self) -> None:
        assert serialize(math.nan, "double") == bytes.fromhex("7ff8000000000000")

    @pytest.mark.parametrize(
        ("value", "cql"),
        [
            (2**31, "int"),
            (-129, "tinyint"),
            ("1", "int"),
            (True, "int"),
            ("é", "ascii"),
            (1, "boolean"),
            (1e300, "float"),
            ("nope", "inet"),
            ("xyz", "uuid"),
            (datetime(2020, 1, 1), "date"),
            (2**32, "date"),
            ("ab", "blob"),
        ],
    )
    def test_refuses_values_of_the_wrong_kind(self, value: object, cql: str) -> None:
        with pytest.raises(ConfigurationError):
            serialize(value, cql)

    def test_unknown_type_names_the_supported_types(self) -> None:
        with pytest.raises(ConfigurationError) as caught:
            serialize(1, "decimal")
        assert "decimal" in caught.value.problem
        for name in ("int", "text", "uuid", "blob", "inet"):
            assert name in caught.value.fix

    def test_type_names_are_case_insensitive(self) -> None:
        assert serialize(1, "INT") == serialize(1, "int")

    def test_supported_types(self) -> None:
        required = {"int", "bigint", "smallint", "tinyint", "text", "varchar", "ascii", "uuid", "timeuuid"}
        required |= {"timestamp", "date", "boolean", "double", "float", "blob", "inet"}
        assert required <= SUPPORTED_TYPES


# The Python driver's own serializers (cassandra.cqltypes) are an independent implementation of
# Cassandra's native protocol serialization: ours must agree with them byte for byte.
PROTOCOL = 4
DRIVER_TYPES: list[tuple[str, type[cqltypes._CassandraType], st.SearchStrategy[object]]] = [
    ("int", cqltypes.Int32Type, st.integers(-(2**31), 2**31 - 1)),
    ("bigint", cqltypes.LongType, st.integers(-(2**63), 2**63 - 1)),
    ("smallint", cqltypes.ShortType, st.integers(-(2**15), 2**15 - 1)),
    ("tinyint", cqltypes.ByteType, st.integers(-128, 127)),
    ("varint", cqltypes.IntegerType, st.integers(-(2**200), 2**200)),
    ("text", cqltypes.UTF8Type, st.text()),
    ("ascii", cqltypes.AsciiType, st.text(alphabet=st.characters(max_codepoint=127))),
    ("uuid", cqltypes.UUIDType, st.uuids()),
    ("boolean", cqltypes.BooleanType, st.booleans()),
    ("double", cqltypes.DoubleType, st.floats(allow_nan=False)),
    ("float", cqltypes.FloatType, st.floats(width=32, allow_nan=False)),
    ("blob", cqltypes.BytesType, st.binary()),
    ("inet", cqltypes.InetAddressType, st.ip_addresses().map(str)),
    ("date", cqltypes.SimpleDateType, st.dates()),
    ("timestamp", cqltypes.DateType, st.integers(-(2**50), 2**50)),
]


@pytest.mark.parametrize(("cql", "driver_type", "values"), DRIVER_TYPES, ids=[t[0] for t in DRIVER_TYPES])
@given(data=st.data())
def test_serialization_matches_the_python_driver(
    cql: str,
    driver_type: type[cqltypes._CassandraType],
    values: st.SearchStrategy[object],
    data: st.DataObject,
) -> None:
    value = data.draw(values)
    assert serialize(value, cql) == driver_type.serialize(value, PROTOCOL)


class TestCompositeKeys:
    def test_encoding_is_length_bytes_and_end_of_component(self) -> None:
        assert composite_key([b"\x00\x00\x00\x01", b"ab"]) == (b"\x00\x04\x00\x00\x00\x01\x00" + b"\x00\x02ab\x00")

    def test_single_value_is_not_wrapped(self) -> None:
        assert partition_key([1], ["int"]) == b"\x00\x00\x00\x01"

    def test_token_is_the_hash_of_the_composite(self) -> None:
        key = composite_key([serialize(1, "int"), serialize("a", "text")])
        assert token_for([1, "a"], ["int", "text"]) == murmur3_token(key)

    @given(st.integers(-(2**31), 2**31 - 1), st.text(max_size=40), st.uuids())
    def test_composite_token_matches_the_drivers_routing_key(self, number: int, text: str, ident: uuid.UUID) -> None:
        # The driver packs composite routing keys itself (Statement.routing_key) and hashes them for
        # token-aware routing (Murmur3Token.hash_fn): an independent path to the same token.
        statement = SimpleStatement("SELECT 1")
        statement.routing_key = [
            cqltypes.Int32Type.serialize(number, PROTOCOL),
            cqltypes.UTF8Type.serialize(text, PROTOCOL),
            cqltypes.UUIDType.serialize(ident, PROTOCOL),
        ]
        expected = Murmur3Token.hash_fn(statement.routing_key)
        assert token_for([number, text, ident], ["int", "text", "uuid"]) == expected

    def test_oversized_component_is_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="65535"):
            composite_key([b"x" * 70000, b"y"])

    def test_value_count_must_match_type_count(self) -> None:
        with pytest.raises(ConfigurationError, match="one value per partition key column"):
            token_for([1, 2], ["int"])

    def test_types_given_as_one_string_are_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="list of type names"):
            token_for([1], "int")


class TestTextParsing:
    @pytest.mark.parametrize(
        ("texts", "types", "values"),
        [
            (["-7"], ["bigint"], [-7]),
            (["0xCAFE"], ["blob"], [b"\xca\xfe"]),
            (["0x"], ["blob"], [b""]),
            (["TRUE"], ["boolean"], [True]),
            (["false"], ["boolean"], [False]),
            (["1546300800000"], ["timestamp"], [1546300800000]),
            (["2019-01-01 00:00:00"], ["timestamp"], [datetime(2019, 1, 1, tzinfo=UTC)]),
            (["2019-01-01T09:00:00+09:00"], ["timestamp"], [datetime(2019, 1, 1, tzinfo=UTC)]),
            (["2019-01-01 00:00:00+0000"], ["timestamp"], [datetime(2019, 1, 1, tzinfo=UTC)]),
            (["2019-01-01"], ["timestamp"], [datetime(2019, 1, 1, tzinfo=UTC)]),
            (["2019-01-01"], ["date"], [date(2019, 1, 1)]),
            (["2147483648"], ["date"], [date(1970, 1, 1)]),
            (["NaN"], ["double"], [math.nan]),
            (["-2.5"], ["float"], [-2.5]),
            (["127.0.0.3"], ["inet"], [ipaddress.ip_address("127.0.0.3")]),
            (["2001:db8::1"], ["inet"], [ipaddress.ip_address("2001:db8::1")]),
            (
                ["5132b130-ae79-11e4-ab27-0800200c9a66"],
                ["timeuuid"],
                [uuid.UUID("5132b130-ae79-11e4-ab27-0800200c9a66")],
            ),
            (["1", "héllo"], ["int", "text"], [1, "héllo"]),
        ],
    )
    def test_text_gives_the_token_of_the_typed_value(
        self, texts: list[str], types: list[str], values: list[object]
    ) -> None:
        assert token_of_text(texts, types) == token_for(values, types)

    def test_empty_blob_key_has_the_minimum_token(self) -> None:
        assert token_of_text(["0x"], ["blob"]) == MIN_TOKEN

    @pytest.mark.parametrize(
        ("text", "cql", "hint"),
        [
            ("CAFE", "blob", "0x"),
            ("0xCAF", "blob", "hex"),
            ("yes", "boolean", "true or false"),
            ("1.5", "int", "integer"),
            ("tomorrow", "timestamp", "ISO 8601"),
            ("2019-13-01", "date", "YYYY-MM-DD"),
            ("abc", "double", "number"),
        ],
    )
    def test_unparsable_text_is_refused_with_a_hint(self, text: str, cql: str, hint: str) -> None:
        with pytest.raises(ConfigurationError, match=hint):
            token_of_text([text], [cql])

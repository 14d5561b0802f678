"""Lucene filters: parsing into the neutral tree, field listing, type checks, evaluation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from warehouse.errors import QuerySyntaxError
from warehouse.filters import lucene
from warehouse.filters.lucene import And, Exists, Not, Or, Phrase, Range, Term
from warehouse.stores.local_query import arrow_kinds, to_mask


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        pytest.param("experiment:svm", Term("experiment", "svm"), id="term"),
        pytest.param(
            "experiment:resnet AND metrics.val.acc:>=0.9 AND NOT tags:debug",
            And(
                (
                    Term("experiment", "resnet"),
                    Range("metrics.val.acc", "0.9", None, True, False),
                    Not(Term("tags", "debug")),
                )
            ),
            id="design-example",
        ),
        pytest.param("x:>5", Range("x", "5", None, False, False), id="gt"),
        pytest.param("x:<=5", Range("x", None, "5", False, True), id="lte"),
        pytest.param("x:[1 TO 5}", Range("x", "1", "5", True, False), id="mixed-range"),
        pytest.param("x:{* TO 5]", Range("x", None, "5", False, True), id="open-low"),
        pytest.param(
            'ended_at:>="2024-05-01T10:00:00"',
            Range("ended_at", "2024-05-01T10:00:00", None, True, False),
            id="quoted-date",
        ),
        pytest.param("_exists_:git.commit", Exists("git.commit"), id="exists"),
        pytest.param("git.commit:*", Exists("git.commit"), id="field-star"),
        pytest.param("tags:ab*c?", Term("tags", "ab*c?", wildcard=True), id="wildcard"),
        pytest.param(r"f:a\*b", Term("f", "a*b"), id="escaped-star-is-literal"),
        pytest.param(r"f:a\:b", Term("f", "a:b"), id="escaped-colon"),
        pytest.param('f:"two words"', Phrase("f", "two words"), id="phrase"),
        pytest.param("f:(a OR b)", Or((Term("f", "a"), Term("f", "b"))), id="field-group"),
        pytest.param(
            "a OR b AND c",
            Or((Term(None, "a"), And((Term(None, "b"), Term(None, "c"))))),
            id="and-binds-tighter",
        ),
        pytest.param("a b", Or((Term(None, "a"), Term(None, "b"))), id="implicit-or"),
        pytest.param(
            "+a -b c",
            And((Term(None, "a"), Not(Term(None, "b")))),
            id="must-must-not-should",
        ),
        pytest.param(
            "a -b", And((Not(Term(None, "b")), Term(None, "a"))), id="should-and-must-not"
        ),
        pytest.param("-b", Not(Term(None, "b")), id="only-must-not"),
        pytest.param("svm^2", Term(None, "svm"), id="boost-ignored"),
        pytest.param(
            "experiment:svm && tags:demo",
            And((Term("experiment", "svm"), Term("tags", "demo"))),
            id="double-ampersand-is-and",
        ),
        pytest.param("f:(a || b)", Or((Term("f", "a"), Term("f", "b"))), id="double-bar-is-or"),
        pytest.param(
            "f:a && !tags:x", And((Term("f", "a"), Not(Term("tags", "x")))), id="bang-is-not"
        ),
        pytest.param('f:"a && !b"', Phrase("f", "a && !b"), id="symbols-in-quotes-stay"),
        pytest.param(r"f:a\!b", Term("f", "a!b"), id="escaped-bang-stays"),
        pytest.param("  ", lucene.MATCH_ALL, id="blank"),
        pytest.param("*", lucene.MATCH_ALL, id="star"),
    ],
)
def test_parse_builds_the_neutral_tree(text: str, tree: lucene.Node) -> None:
    assert lucene.parse(text) == tree


def test_none_matches_everything() -> None:
    assert lucene.parse(None) == lucene.MATCH_ALL


def test_fields_lists_every_named_field_and_not_the_default_ones() -> None:
    node = lucene.parse("a:1 AND (b:[1 TO 2] OR NOT _exists_:c) AND bare AND d:x*")
    assert lucene.fields(node) == {"a", "b", "c", "d"}


@pytest.mark.parametrize(
    ("text", "position"),
    [
        pytest.param("experiment:svm AND (status:failed", 33, id="unclosed-paren"),
        pytest.param("x:[1 TO]", 7, id="bad-range"),
        pytest.param("a AND", 5, id="dangling-and"),
    ],
)
def test_bad_syntax_names_the_position(text: str, position: int) -> None:
    with pytest.raises(QuerySyntaxError, match=f"position {position}") as caught:
        lucene.parse(text)
    assert caught.value.context["position"] == position


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("f:x~2", id="fuzzy"),
        pytest.param("f:/re.*/", id="regex"),
        pytest.param('f:"a b"~3', id="proximity"),
        pytest.param("a:b:c", id="nested-field"),
    ],
)
def test_unsupported_queries_are_refused_clearly(text: str) -> None:
    with pytest.raises(QuerySyntaxError, match=r"not supported|inside field"):
        lucene.parse(text)


@pytest.mark.parametrize("word", ["and", "or", "not", "And"])
def test_lower_case_operators_are_refused_rather_than_searched(word: str) -> None:
    """In Lucene ``a:1 and b:2`` searches the word "and" and ORs the three: a filter that
    silently matches too much. It is refused with the fix."""
    text = f"experiment:svm {word} tags:demo" if word != "not" else "not tags:demo"
    with pytest.raises(QuerySyntaxError, match=rf"write {word.upper()} in capitals"):
        lucene.parse(text)


# evaluation over an Arrow table ---------------------------------------------------------
TABLE = pa.table(
    {
        "run_id": ["r0", "r1", "r2", "r3"],
        "experiment": ["svm", "knn", "svm_2", None],
        "tags": pa.array([["prod", "sweep"], ["debug"], [], None], pa.list_(pa.string())),
        "metrics.val.acc": [0.9, 0.5, float("nan"), None],
        "git.dirty": [True, False, None, True],
        "ended_at": pa.array(
            [datetime(2024, 5, d, tzinfo=UTC) for d in (1, 2, 3)] + [None],
            pa.timestamp("us", tz="UTC"),
        ),
        "params.note": ["50%_off", "a_b", "axb", None],
        "nothing": pa.nulls(4),
        "split": pa.array(["val", "val", "test", "val"]).dictionary_encode(),
    }
)


def matching(text: str) -> list[str]:
    mask = to_mask(lucene.parse(text), TABLE)
    return [TABLE.column("run_id")[int(i)].as_py() for i in np.flatnonzero(mask)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("experiment:svm", ["r0"], id="exact-not-prefix"),
        pytest.param("experiment:svm*", ["r0", "r2"], id="wildcard"),
        pytest.param("tags:sweep", ["r0"], id="list-any-element"),
        pytest.param("tags:*bug", ["r1"], id="list-wildcard"),
        pytest.param("_exists_:tags", ["r0", "r1"], id="empty-list-does-not-exist"),
        pytest.param("NOT tags:debug", ["r0", "r2", "r3"], id="not-includes-missing"),
        pytest.param("metrics.val.acc:>=0.5", ["r0", "r1"], id="range-skips-nan-and-null"),
        pytest.param("metrics.val.acc:{0.5 TO 0.9]", ["r0"], id="exclusive-low"),
        pytest.param("_exists_:metrics.val.acc", ["r0", "r1"], id="nan-does-not-exist"),
        pytest.param("metrics.val.acc:0.9", ["r0"], id="number-equality"),
        pytest.param("git.dirty:true", ["r0", "r3"], id="boolean"),
        pytest.param("git.dirty:FALSE", ["r1"], id="boolean-any-case"),
        pytest.param("ended_at:[2024-05-02 TO *]", ["r1", "r2"], id="date-range"),
        pytest.param('ended_at:<"2024-05-02T00:00:01Z"', ["r0", "r1"], id="date-time"),
        pytest.param(r"params.note:50%\_*", ["r0"], id="sql-like-chars-are-literal"),
        pytest.param("params.note:a?b", ["r1", "r2"], id="one-char-wildcard"),
        pytest.param(r"params.note:a\_b", ["r1"], id="escaped-underscore"),
        pytest.param("nothing:x OR _exists_:nothing", [], id="empty-column"),
        pytest.param("split:test", ["r2"], id="dictionary-column"),
        pytest.param("svm", ["r0"], id="bare-term-default-fields"),
        pytest.param("debug OR r3", ["r1", "r3"], id="bare-terms-tags-and-run-id"),
        pytest.param("run_id:[r1 TO r2]", ["r1", "r2"], id="text-range"),
        pytest.param("*", ["r0", "r1", "r2", "r3"], id="match-all"),
    ],
)
def test_to_mask_selects_the_expected_rows(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("metrics.val.ac:>1", "closest known fields: metrics.val.acc", id="unknown"),
        pytest.param("metrics.val.acc:>=high", "is numeric", id="text-bound-on-number"),
        pytest.param("metrics.val.acc:high", "is numeric", id="text-term-on-number"),
        pytest.param("metrics.val.acc:0.*", "wildcards", id="wildcard-on-number"),
        pytest.param("run_id:>5", "is text", id="number-range-on-text"),
        pytest.param("git.dirty:maybe", "boolean", id="bad-boolean"),
        pytest.param("git.dirty:[a TO b]", "boolean", id="range-on-boolean"),
        pytest.param("ended_at:>yesterday", "ISO-8601", id="bad-date"),
    ],
)
def test_type_mismatches_and_unknown_fields_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError, match=message):
        to_mask(lucene.parse(text), TABLE)


def test_unknown_field_error_carries_the_suggestions() -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        lucene.validate(lucene.parse("experimnt:svm"), {"experiment": lucene.TEXT})
    assert caught.value.context == {"field": "experimnt", "suggestions": ["experiment"]}


def test_bare_term_without_default_fields_asks_for_a_field() -> None:
    with pytest.raises(QuerySyntaxError, match="field:value"):
        lucene.validate(lucene.parse("svm"), {"loss": lucene.NUMBER}, default_fields=())


def test_validate_works_from_a_kind_mapping_alone() -> None:
    columns: dict[str, Any] = {"metrics.val.acc": lucene.NUMBER, "experiment": lucene.TEXT}
    lucene.validate(lucene.parse("experiment:s* AND metrics.val.acc:[0.1 TO 1]"), columns)
    with pytest.raises(QuerySyntaxError, match="numeric"):
        lucene.validate(lucene.parse("metrics.val.acc:[a TO b]"), columns)


def test_arrow_kinds_maps_column_types_and_hides_private_columns() -> None:
    schema = pa.schema(
        [
            ("n", pa.int32()),
            ("f", pa.float64()),
            ("b", pa.bool_()),
            ("t", pa.timestamp("ms")),
            ("s", pa.string()),
            ("d", pa.dictionary(pa.int32(), pa.string())),
            ("l", pa.list_(pa.string())),
            ("z", pa.null()),
            ("_doc", pa.string()),
        ]
    )
    assert arrow_kinds(schema) == {
        "n": lucene.NUMBER,
        "f": lucene.NUMBER,
        "b": lucene.BOOLEAN,
        "t": lucene.DATE,
        "s": lucene.TEXT,
        "d": lucene.TEXT,
        "l": lucene.TEXT_LIST,
        "z": lucene.EMPTY,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("now", "2026-03-31T10:20:30", id="now"),
        pytest.param("now-7d", "2026-03-24T10:20:30", id="days"),
        pytest.param("now-1h+30m", "2026-03-31T09:50:30", id="two-steps"),
        pytest.param("now-1M", "2026-02-28T10:20:30", id="month-end-clamped"),
        pytest.param("now-1y/M", "2025-03-01T00:00:00", id="year-rounded-to-month"),
        pytest.param("now/w", "2026-03-30T00:00:00", id="week-starts-monday"),
        pytest.param("now-1d/d", "2026-03-30T00:00:00", id="yesterday"),
    ],
)
def test_date_math_as_kibana_users_type_it(text: str, expected: str) -> None:
    now = datetime(2026, 3, 31, 10, 20, 30, tzinfo=UTC)
    assert lucene.date_math("ended_at", text, now) == datetime.fromisoformat(expected).replace(
        tzinfo=UTC
    )


def test_bad_date_math_says_how_to_write_it() -> None:
    with pytest.raises(QuerySyntaxError, match="now-7d"):
        lucene.date_math("ended_at", "now-7days")


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        pytest.param(
            "2026-11-20", "2026-11-20T00:00:00.000Z", "2026-11-20T23:59:59.999Z", id="day"
        ),
        pytest.param("2026-11", "2026-11-01T00:00:00.000Z", "2026-11-01T23:59:59.999Z", id="month"),
        pytest.param(
            "2026-11-20T10:00:00", "2026-11-20T10:00:00.000Z", "2026-11-20T10:00:00.999Z", id="s"
        ),
        pytest.param(
            "2026-11-20T10:00:00.123456+01:00",
            "2026-11-20T09:00:00.123Z",
            "2026-11-20T09:00:00.123Z",
            id="zone-and-micros",
        ),
        pytest.param(
            "2014-11-18||/M", "2014-11-01T00:00:00.000Z", "2014-11-30T23:59:59.999Z", id="anchor"
        ),
        pytest.param("now-1d/d", "2026-03-30T00:00:00.000Z", "2026-03-30T23:59:59.999Z", id="now"),
        pytest.param(
            "1700000000000", "2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20.000Z", id="ms"
        ),
    ],
)
def test_dates_span_what_elasticsearch_makes_of_them(text: str, first: str, last: str) -> None:
    # the Elasticsearch 9 range-query page: missing parts default to 01/01 23:59:59.999 when
    # rounding up; ||/M rounds to the month's first and last millisecond
    now = datetime(2026, 3, 31, 10, 20, 30, tzinfo=UTC)
    low, high = lucene.date_span("ended_at", text, now)
    assert (lucene.iso_ms(low), lucene.iso_ms(high)) == (first, last)


def test_date_bounds_round_as_elasticsearch_does() -> None:
    def bounds(text: str) -> tuple[str | None, str | None]:
        node = lucene.parse(text)
        assert isinstance(node, lucene.Range | lucene.Term)
        low, high = lucene.ms_bounds(node)
        return (
            None if low is None else lucene.iso_ms(low),
            None if high is None else lucene.iso_ms(high),
        )

    assert bounds("t:>2026-11-20") == ("2026-11-21T00:00:00.000Z", None)
    assert bounds("t:>=2026-11-20") == ("2026-11-20T00:00:00.000Z", None)
    assert bounds("t:<2026-11-20") == (None, "2026-11-19T23:59:59.999Z")
    assert bounds("t:<=2026-11-20") == (None, "2026-11-20T23:59:59.999Z")
    assert bounds("t:2026-11-20") == ("2026-11-20T00:00:00.000Z", "2026-11-20T23:59:59.999Z")


def test_analysed_text_is_cut_into_lower_case_words() -> None:
    assert lucene.analyze("CUDA error: out of memory (tried 2.00 GiB); Out-of-memory") == [
        "cuda", "error", "out", "of", "memory", "tried", "2.00", "gib", "out", "of", "memory",
    ]  # fmt: skip

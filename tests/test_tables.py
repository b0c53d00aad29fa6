"""The shared writers of what a reader opens (store.write_csv, reports.markdown.markdown_table)
and the store's readers of what a run or a sweep left."""
import gzip

import pytest

from experiments.errors import SpecError
from experiments.reports.markdown import markdown_table
from experiments.store import read_csv, read_json, read_jsonl, write_csv


def test_write_csv_writes_the_columns_in_order_and_leaves_missing_values_empty(tmp_path):
    path = tmp_path / "rows.csv"
    write_csv(path, [{"b": 1.5, "a": "x, y", "extra": 9}, {"a": None}], ("a", "b"))
    assert path.read_bytes() == b'a,b\r\n"x, y",1.5\r\n,\r\n'
    assert read_csv(path) == [{"a": "x, y", "b": "1.5"}, {"a": "", "b": ""}]
    write_csv(path, [], ["only"])  # replaced whole, no temporary file left beside it
    assert path.read_bytes() == b"only\r\n" and [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_markdown_table_is_a_header_a_rule_and_a_line_a_row():
    assert markdown_table(["a", "b"], [["1", 2], ["", "x"]]) == "| a | b |\n|---|---|\n| 1 | 2 |\n|  | x |"
    assert markdown_table(["only"], []) == "| only |\n|---|"


@pytest.mark.parametrize("name, data, problem", [
    ("events.jsonl", b'{"t": 1}\n{"t": 2\n', "line 2: not JSON"),
    ("events.jsonl.gz", gzip.compress(b'{"t": 1}\n' * 50)[:30], "not a whole gzip file"),
    ("events.jsonl.gz", b"plain text", "not a whole gzip file"),
    ("events.jsonl", b'{"t": "\xb6"}\n', "not UTF-8 text"),
])
def test_a_garbled_run_file_is_refused_in_one_line_naming_it(tmp_path, name, data, problem):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(SpecError, match=problem) as err:
        read_jsonl(tmp_path / "events.jsonl")
    assert err.value.field == str(tmp_path / name) and "\n" not in str(err.value)


def test_a_garbled_summary_or_table_is_refused_in_one_line(tmp_path):
    (tmp_path / "summary.json").write_text('{"completed": tr')
    with pytest.raises(SpecError, match="summary.json: not JSON"):
        read_json(tmp_path / "summary.json")
    (tmp_path / "results.csv").write_bytes(b"cell,seed\n\xb6,1\n")
    with pytest.raises(SpecError, match="results.csv: not UTF-8 text"):
        read_csv(tmp_path / "results.csv")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json")


def test_read_csv_keeps_line_breaks_inside_a_field(tmp_path):
    rows = [{"a": "two\nlines", "b": "form\x0cfeed \u2028 separator"}, {"a": "x", "b": "y"}]
    write_csv(tmp_path / "rows.csv", rows, ("a", "b"))
    assert read_csv(tmp_path / "rows.csv") == rows

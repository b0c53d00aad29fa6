"""The shared writers of what a reader opens: store.write_csv and reports.markdown.markdown_table."""
from experiments.reports.markdown import markdown_table
from experiments.store import read_csv, write_csv


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

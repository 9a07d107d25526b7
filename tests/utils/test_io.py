"""utils/io.py's JSON files: orjson writes and reads them, json takes what orjson refuses."""
from __future__ import annotations

import json
import math

import pytest

from cupid.utils.io import atomic_write_json, read_json


def test_an_instance_file_is_written_as_json_dumps_with_an_indent_writes_it(tmp_path):
    data = {"persona_id": "p-1", "text": "é\u2028</script>", "scores": [7, 0.25, None, True],
            "empty": {}, "steps": {"infer": {"output": "x" * 3, "usage": {"prompt_tokens": 10}}}}
    path = tmp_path / "a.json"
    atomic_write_json(path, data)
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert read_json(path) == data


def test_what_orjson_refuses_is_written_and_read_by_json(tmp_path):
    big = {"count": 2 ** 70}  # beyond 64 bits
    atomic_write_json(tmp_path / "big.json", big)
    assert read_json(tmp_path / "big.json") == big
    (tmp_path / "nan.json").write_text('{"score": NaN}')  # json.dumps writes NaN, orjson refuses it
    assert math.isnan(read_json(tmp_path / "nan.json")["score"])


@pytest.mark.parametrize("content", [b'{"steps": {', b'\xff\xfe{}'])
def test_a_broken_file_is_an_error_that_names_it(tmp_path, content):
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        read_json(path)

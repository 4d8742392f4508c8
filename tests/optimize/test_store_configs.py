"""Judge configurations kept beside their run, on SQLite and PostgreSQL (revision 0007)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from turneval import MultiTurnSample, evaluate
from turneval.errors import ConfigError
from turneval.judge import JudgeConfig
from turneval.store import RunStore

from ._judges import sample


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    server: Any = request.getfixturevalue("postgres_server")
    return str(server.database())


def test_a_config_is_kept_beside_its_run_and_goes_with_it(store_url: str) -> None:
    samples: list[MultiTurnSample] = [sample(i, "done") for i in range(2)]
    with RunStore(store_url) as store:
        evaluate(samples, ["tool_call_f1"], store=store, show_progress=False)
        (run,) = store.runs()
        first = JudgeConfig(metric="m", instructions="one")
        second = JudgeConfig(metric="m", instructions="two", parent=first.digest)
        a = store.add_judge_config(
            {**first.model_dump(mode="json"), "digest": first.digest}, run_id=run.id[:8]
        )
        b = store.add_judge_config(
            {**second.model_dump(mode="json"), "digest": second.digest},
            run_id=run.id,
            report={"before": 0.1, "after": 0.5},
        )
        kept = store.judge_configs(run_id=run.id)
        assert [c.id for c in kept] == [b, a]  # newest first
        assert kept[0].parent == first.digest and kept[0].report == {"before": 0.1, "after": 0.5}
        assert (
            JudgeConfig.model_validate({k: v for k, v in kept[0].config.items() if k != "digest"})
            == second
        )
        assert store.judge_config(a).digest == first.digest
        assert store.judge_configs(metric="other") == []
        with pytest.raises(ConfigError, match="no judge configuration 999"):
            store.judge_config(999)
        with pytest.raises(ConfigError, match="'metric' and its 'digest'"):
            store.add_judge_config({"instructions": "x"})
        store.delete_run(run.id)
        assert store.judge_configs() == []

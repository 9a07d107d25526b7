"""CUPID's instances as inspect samples: read and validated in full by evaluation/data.py (a
bad row stops the task before any call, naming its file, row and field), each sample's input
the request the evaluated model is sent (evaluation/steps/infer.py or generate.py) with the
history the setting shows (evaluation/strategies.py), its target the true preference, its
metadata what the scorer and the clustered standard errors read (``persona_id``)."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser

from ..evaluation.data import InstanceSource
from ..evaluation.strategies import Strategy
from ..evaluation.steps import generate, infer
from ..evaluation.steps.ask import Ask
from .requests import messages
from ..utils.dataset import Instance
from ..utils.redact import redact

log = logging.getLogger("cupid.inspect")


@dataclass
class Data:
    dataset: MemoryDataset
    instances: dict[str, Instance]  # by sample id, for the solver and the scorer
    source: dict                     # where the data came from (its fingerprint, commit)

    def instance(self, sample_id: str | int) -> Instance:
        return self.instances[str(sample_id)]

    def _repr_params_(self) -> dict:
        """What inspect logs of the solver's and scorer's argument: the data's source, not
        every instance's sessions (tens of megabytes of 756 instances in the log's header)."""
        return self.source


def request_of(task: str, instance: Instance, setting: Strategy, history: str | None = None) -> Ask:
    """The evaluated model's request for ``task``: the history the setting shows, or
    ``history`` (the summaries, in the summary setting); the true preference where the
    setting gives it (oracle_preference)."""
    if setting.preference_given:
        return generate.ask_given_preference(instance.current_contextual_preference, instance.current_request)
    from_summaries = history is not None
    text = history if from_summaries else setting.shown(instance).text
    step = infer if task == "inference" else generate
    return step.ask(text, instance.current_request, from_summaries=from_summaries)


def sample_of(task: str, instance: Instance, setting: Strategy) -> Sample:
    """One instance as a sample. One the setting skips, or whose history the setting's code
    could not give, keeps its reason in the metadata: the solver sends nothing for it and
    the scorer leaves it unscored with that reason, as cupid-eval skips or fails it."""
    metadata = {"instance_id": instance.instance_id, "persona_id": instance.persona_id,
                "instance_type": instance.instance_type, "setting": setting.name,
                "current_checklist": list(instance.current_checklist),
                "skipped": setting.skip_reason(instance), "context_error": None}
    placeholder = [ChatMessageUser(content=instance.current_request)]
    if metadata["skipped"] or (setting.summaries and not setting.preference_given):
        # The summary setting's request is rendered once the summaries are there (the solver).
        prompt = placeholder
    else:
        try:
            prompt = messages(request_of(task, instance, setting))
        except Exception as exc:  # the strategy's own code (a user's) raised
            metadata["context_error"] = redact(f"{type(exc).__name__}: {exc}")
            prompt = placeholder
    return Sample(id=instance.instance_id, input=prompt, target=instance.current_contextual_preference,
                  metadata=metadata)


def load(task: str, setting: Strategy, *, data_dir: str | None, dataset: str, split: str,
         revision: str | None, limit: int | None) -> Data:
    """The samples of a local file or directory (``data_dir``), else of the hub split at
    ``revision``. Raises DataValidationError naming what is wrong."""
    source = InstanceSource(data_path=data_dir, dataset=None if data_dir else dataset, split=split,
                            limit=limit, revision=revision)
    source.validate()
    for warning in source.warnings:
        log.warning("%s: %s", source.name, warning)
    instances = {instance.instance_id: instance for instance in source}
    samples = [sample_of(task, instance, setting) for instance in instances.values()]
    return Data(MemoryDataset(samples, name=source.name), instances, source.describe())

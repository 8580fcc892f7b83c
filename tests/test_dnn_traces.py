"""Gradient traces of the CNNs of Castelló et al. (Fig. 7), their fusion into allreduce calls,
the table and figure, and the ``harness dnn traces`` command. Fast: no MPI, no training."""

from __future__ import annotations

import argparse
import csv
import importlib.util

import pytest
from requirements_support import missing, require_module, require_spec

from harness.dnn import fusion, traces

MiB = 1024 * 1024
TORCHVISION = ("alexnet", "resnet50", "vgg11")
CLASSIFIER_BIAS = {"alexnet": ("classifier.6.bias", 1000), "resnet50": ("fc.bias", 1000),
                   "vgg11": ("classifier.6.bias", 1000), "resnet110": ("fc.bias", 10)}
EXACT = {"alexnet": 61_100_840, "resnet50": 25_557_032, "vgg11": 132_863_336}


# ------------------------------------------------------------------------------- traces


@pytest.mark.parametrize("model", traces.MODELS)
def test_committed_trace_equals_generated(model):
    require_module("torch")
    # not imported here: a plain `import torchvision` fails beside the CPU torch (see
    # harness/dnn/models.py); the models module imports it with the workaround
    require_spec("torchvision")
    assert traces.load(model) == traces.generate(model)


@pytest.mark.parametrize("model", traces.MODELS)
def test_parameter_totals_against_published(model):
    t = traces.load(model)
    assert t.parameters == sum(t.numels) == sum(n for _, n in t.tensors)
    if model in EXACT:  # torchvision's own counts
        assert t.parameters == EXACT[model]
    else:
        # He et al., Table 6: "1.7M", i.e. rounded to 0.1M (the count is 1.6% above 1.7M)
        assert round(t.parameters / 1e5) == 17
        assert t.parameters == 1_727_962  # option A, BN, no conv bias (models.resnet110)
    if model == "vgg11":  # Simonyan & Zisserman, Table 2: 133M
        assert round(t.parameters / 1e6) == 133 and t.published_parameters == 133_000_000
    assert traces.matches_published(t)
    assert t.dataset == traces.INFO[model].dataset


def test_matches_published_can_fail():
    t = traces.load("resnet110")
    off = traces.Trace(t.model, t.dataset, t.source, (("x", 1_800_000),),
                       t.published_parameters, t.published_source)
    assert not traces.matches_published(off)
    a = traces.load("alexnet")
    one_more = traces.Trace(a.model, a.dataset, a.source, a.tensors + (("x", 1),),
                            a.published_parameters, a.published_source)
    assert not traces.matches_published(one_more)


@pytest.mark.parametrize("model", traces.MODELS)
def test_backward_order_starts_with_the_classifier_bias(model):
    t = traces.load(model)
    assert t.tensors[0] == CLASSIFIER_BIAS[model]
    assert t.tensors[1][0] == CLASSIFIER_BIAS[model][0].replace("bias", "weight")
    assert t.tensors[-1][0] in ("conv1.weight", "features.0.weight")  # the first layer


def test_backward_order_is_reverse_registration_and_autograd_agrees():
    torch = require_module("torch")
    from harness.dnn import models

    m = models.build("resnet110", device="cpu")
    names = [n for n, _ in m.named_parameters()]
    assert [n for n, _ in models.gradient_tensors(m)] == names[::-1]
    # the order in which autograd really accumulates the gradients: the same sequence of
    # layers; within one layer weight and bias may come in either order
    fired = []
    for n, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _p, n=n: fired.append(n))
    m(torch.randn(2, 3, 32, 32)).sum().backward()

    def layers(seq):
        out = []
        for n in seq:
            layer = n.rsplit(".", 1)[0]
            if not out or out[-1] != layer:
                out.append(layer)
        return out

    assert sorted(fired) == sorted(names)
    assert layers(fired) == layers(names[::-1])
    numel = dict(models.gradient_tensors(m))
    for policy in fusion.POLICIES:
        assert fusion.calls([numel[n] for n in fired], policy, "fp32") == fusion.calls(
            traces.load("resnet110").numels, policy, "fp32")


def test_load_unknown_model():
    with pytest.raises(ValueError, match=r"model.*'resnet18'.*alexnet, resnet50, vgg11, resnet110"):
        traces.load("resnet18")
    with pytest.raises(ValueError, match="'lenet'"):
        traces.generate("lenet")


def test_write_load_round_trip(tmp_path, monkeypatch):
    t = traces.load("alexnet")
    path = traces.write(t, tmp_path / "alexnet.json")
    monkeypatch.setattr(traces, "TRACES_DIR", tmp_path)
    assert traces.load("alexnet") == t
    assert len(path.read_text().splitlines()) > len(t.tensors)  # one tensor a line


# ------------------------------------------------------------------------------- fusion


@pytest.mark.parametrize("model", traces.MODELS)
@pytest.mark.parametrize("precision", list(fusion.PRECISIONS))
def test_horovod_fusion(model, precision):
    numels = traces.load(model).numels
    itemsize = fusion.PRECISIONS[precision]
    sizes = [n * itemsize for n in numels]
    c = fusion.calls(numels, "horovod", precision)
    assert sum(c) == sum(sizes)
    oversized = {s for s in sizes if s > fusion.HOROVOD_FUSION_THRESHOLD}
    for call in c:
        assert call <= fusion.HOROVOD_FUSION_THRESHOLD or call in oversized
    # every call is a run of consecutive tensors, each tensor in exactly one call
    buckets = fusion.horovod_buckets(sizes)
    assert [i for b in buckets for i in b] == list(range(len(sizes)))
    # greedy: the next call's first tensor would not have fitted
    for a, b in zip(buckets, buckets[1:]):
        assert sum(sizes[i] for i in a) + sizes[b[0]] > fusion.HOROVOD_FUSION_THRESHOLD


@pytest.mark.parametrize("model", traces.MODELS)
@pytest.mark.parametrize("policy", fusion.POLICIES)
def test_fp16_halves_the_bytes(model, policy):
    numels = traces.load(model).numels
    fp32 = fusion.calls(numels, policy, "fp32")
    fp16 = fusion.calls(numels, policy, "fp16")
    assert sum(fp32) == 4 * sum(numels) == 2 * sum(fp16)
    assert len(fp16) <= len(fp32)


def test_horovod_small_cases():
    T = fusion.HOROVOD_FUSION_THRESHOLD
    assert fusion.horovod_buckets([T // 2, T // 2, 1]) == [[0, 1], [2]]  # fills exactly
    assert fusion.horovod_buckets([1, T + 1, 1]) == [[0], [1], [2]]  # oversized goes alone
    assert fusion.horovod_buckets([]) == []


def test_ddp_small_cases():
    first, cap = fusion.DDP_FIRST_BUCKET_BYTES, fusion.DDP_BUCKET_BYTES
    assert fusion.ddp_buckets([first - 1, 1, 1]) == [[0, 1], [2]]  # closes on reaching the cap
    assert fusion.ddp_buckets([first + cap]) == [[0]]
    assert fusion.ddp_buckets([1, first, cap - 1, 2, 3]) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("model", traces.MODELS)
def test_ddp_matches_torch(model):
    """The pure-Python DDP bucketing equals torch's own C++ ``compute_bucket_assignment_by_size``
    as the Reducer calls it when it rebuilds buckets: tensors in gradient-ready order with
    their indices (so no re-sorting), caps [1 MiB, 25 MiB]."""
    torch = require_module("torch")
    dist = require_module("torch.distributed")
    if not dist.is_available():
        missing("torch.distributed is not available in this torch build (torch "
                f"{torch.__version__}); install a torch with distributed support")
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == fusion.DDP_FIRST_BUCKET_BYTES
    numels = traces.load(model).numels
    for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        tensors = [torch.empty(n, dtype=dtype, device="meta") for n in numels]
        index = list(range(len(tensors)))
        buckets, limits = dist._compute_bucket_assignment_by_size(
            tensors, [fusion.DDP_FIRST_BUCKET_BYTES, fusion.DDP_BUCKET_BYTES],
            [False] * len(tensors), index)
        itemsize = fusion.PRECISIONS[precision]
        assert buckets == fusion.ddp_buckets([n * itemsize for n in numels])
        assert fusion.calls(numels, "ddp", precision) == [
            sum(numels[i] for i in b) * itemsize for b in buckets]
        assert limits[0] == fusion.DDP_FIRST_BUCKET_BYTES


def test_bad_policy_and_precision():
    with pytest.raises(ValueError, match=r"policy.*'nccl'.*horovod, ddp"):
        fusion.calls([1, 2], "nccl", "fp32")
    with pytest.raises(ValueError, match=r"precision.*'bf16'.*fp32, fp16"):
        fusion.calls([1, 2], "ddp", "bf16")


# ------------------------------------------------------------------------ table and figure


def test_make_fig7(tmp_path):
    from harness.report.dnn_traces import make_fig7

    written = make_fig7(traces.MODELS, tmp_path / "tables", tmp_path / "figures")
    names = sorted(p.name for p in written)
    assert names == sorted(["dnn_models.md", "dnn_models.tex", "dnn_models.csv",
                            "dnn_models.html", "dnn_fig7.png", "dnn_fig7.pdf"])
    for p in written:
        assert p.exists() and p.stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "tables" / "dnn_models.csv").open()))
    assert [r["model"] for r in rows] == list(traces.MODELS)
    assert all(r["matches"] == "True" for r in rows)
    md = (tmp_path / "tables" / "dnn_models.md").read_text()
    assert sum(line.startswith("| ") for line in md.splitlines()) == 1 + len(traces.MODELS)
    vgg = next(r for r in rows if r["model"] == "vgg11")
    assert int(vgg["horovod_fp32_largest_bytes"]) == 25088 * 4096 * 4  # the first FC layer
    with pytest.raises(ValueError, match="'lenet'"):
        make_fig7(["lenet"], tmp_path / "t", tmp_path / "f")


def _run(argv):
    from harness.cli.dnn import register

    p = argparse.ArgumentParser(prog="harness")
    s = p.add_subparsers(dest="command")
    register(s)
    args = p.parse_args(argv)
    return args.func(args)


def test_command(tmp_path, capsys):
    rc = _run(["dnn", "traces", "--models", "resnet50,vgg11", "--out-tables",
               str(tmp_path / "t"), "--out-figures", str(tmp_path / "f")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "| ResNet-50 |" in out and "| VGG-11 |" in out and "AlexNet |" not in out
    assert (tmp_path / "f" / "dnn_fig7.pdf").exists()
    with pytest.raises(SystemExit, match=r"^2$"):
        _run(["dnn", "traces", "--models", "resnet18"])
    assert "valid: alexnet" in capsys.readouterr().err


def test_command_regenerate_without_torch(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("torch") else real(name, *a))
    rc = _run(["dnn", "traces", "--regenerate", "--out-tables", str(tmp_path / "t"),
               "--out-figures", str(tmp_path / "f")])
    assert rc == 2
    assert "pip install -e '.[dnn]'" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()

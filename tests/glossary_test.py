#!/usr/bin/python3
"""Checks docs/glossary.md, docs/glossary.zh.md and the links to them.

usage: glossary_test.py DOCS_DIR

TERMS below is the one list of glossary terms. Checks:
  1. every term has an entry, an anchor <a id="SLUG"></a>, in both glossary.md and
     glossary.zh.md, and neither file has an entry whose slug is not in TERMS;
  2. in tutorial.md, tutorial.zh.md and labs/*.md, outside fenced code blocks, inline code
     and headings, the first appearance of every term (its English pattern; in a .zh.md
     file its Chinese pattern too) is a link to the glossary with the term's anchor;
     links to the glossary for other terms are skipped over when looking;
  3. every glossary link in those files points to an anchor that exists.
Exits 1 naming every failure; prints PASS otherwise. Python 3 standard library only.
"""
import glob
import os
import re
import sys

# (slug, English pattern, Chinese pattern). The slug is the anchor <a id="SLUG"></a> of the
# entry in both glossaries. Patterns are Python regexes; the English ones match
# case-insensitively except inside "(?-i:...)" (acronyms such as DP, PS, BSP). The
# English pattern is looked for in every file, the Chinese one in tutorial.zh.md too.
TERMS = [
    ("model-parallelism", r"model parallelism", r"模型并行"),
    ("data-parallelism", r"data parallelism", r"数据并行"),
    ("replica", r"(?<!per-)\breplicas?\b", r"(?<!主)副本"),
    ("worker", r"(?<!per-)\bworkers?\b", r"工作节点"),
    ("node", r"(?<!emulated )(?<!slow )\bnodes?\b(?! rank)", r"(?<!工作)(?<!模拟)(?<!慢)(?<!主)(?<!服务器)节点(?!秩)"),
    ("rank", r"(?<!local )(?<!node )\branks?\b", r"(?<!本地)(?<!节点)秩"),
    ("world-size", r"world size", r"世界大小"),
    ("local-rank", r"local ranks?", r"本地秩"),
    ("node-rank", r"node ranks?", r"节点秩"),
    ("launcher", r"\blaunchers?\b", r"启动器"),
    ("torchrun", r"\btorchrun\b", r"torchrun"),
    ("rendezvous", r"\brendezvous\b", r"汇合"),
    ("step", r"\bsteps?\b", r"每一?步"),
    ("epoch", r"\bepochs?\b", r"(?<!_)epoch"),
    ("batch", r"(?<!micro-)(?<!global )\bbatch(es)?\b(?! per)", r"(?<!微)(?<!全局)批次"),
    ("global-batch", r"global batch", r"全局批次|全局批大小|全局批"),
    ("per-worker-batch", r"per-(worker|rank|replica) batch|batch per (worker|rank|replica)",
     r"每个(副本|秩|工作节点)的批大小"),
    ("micro-batch", r"micro-batch(es)?", r"微批次"),
    ("gradient-accumulation", r"gradient accumulation|accumulat(es|ing)\s+gradients",
     r"梯度累积"),
    ("learning-rate", r"learning rate", r"学习率"),
    ("momentum", r"\bmomentum\b", r"动量"),
    ("weight-decay", r"weight decay", r"权重衰减"),
    ("sgd", r"(?-i:\bSGD\b)", r"SGD"),
    ("sampler", r"\bsamplers?\b|DistributedSampler|\bsharder\b", r"采样器|分片器"),
    ("set-epoch", r"\bset_epoch\b", r"set_epoch"),
    ("padding", r"\bpad(s|ding|ded)?\b", r"填充"),
    ("dp", r"(?-i:\bDataParallel\b|\bDP\b)", r"DataParallel|(?<![A-Z])DP(?![A-Z])"),
    ("ddp", r"(?-i:\bDDP\b|\bDistributedDataParallel\b)", r"(?<![A-Z])DDP(?![A-Z])|分布式数据并行"),
    ("master", r"\bmaster\b", r"主线程|主副本|主设备|主节点"),
    ("interpreter-lock", r"interpreter lock|\bGIL\b", r"解释器锁"),
    ("amdahls-law", r"Amdahl's law|Amdahl", r"阿姆达尔"),
    ("parameter-server", r"parameter servers?|(?-i:\bPS\b)", r"参数服务器"),
    ("shard", r"\bshard(s|ed)?\b", r"分片(?!器)"),
    ("colocated", r"\bco-?located\b|shards? inside (the )?workers?", r"同置|共置"),
    ("push", r"\bpush(es|ed|ing)?\b(?!-)", r"推送(?!-)"),
    ("pull", r"(?<!-)\bpull(s|ed|ing)?\b", r"(?<!-)拉取"),
    ("push-pull", r"push-pulls?", r"推送-拉取"),
    ("bsp", r"(?-i:\bBSP\b)|bulk synchronous", r"BSP|整体同步"),
    ("ssp", r"(?-i:\bSSP\b)|bounded staleness", r"SSP|有界延迟同步|有界陈旧"),
    ("asp", r"(?-i:\bASP\b)|asynchronous updates", r"ASP|异步并行"),
    ("staleness", r"\bstale(ness)?\b(?! synchronous)", r"陈旧"),
    ("straggler", r"stragglers?|slow nodes?", r"慢节点|掉队"),
    ("elastic-worker", r"\belastic\b", r"弹性"),
    ("barrier", r"\bbarriers?\b", r"屏障"),
    ("checkpoint", r"\bcheckpoints?\b", r"检查点"),
    ("resume", r"\bresum(e|es|ed|ing)\b", r"恢复"),
    ("collective", r"\bcollectives?\b", r"集合通信|集合操作"),
    ("process-group", r"process groups?", r"进程组"),
    ("root", r"\broot's\b|\bthe root\b", r"有根|根的|根持有"),
    ("broadcast", r"\bbroadcast(s|ing)?\b", r"广播"),
    ("scatter", r"(?<!-)\bscatter(s|ed|ing)?\b", r"(?<!-)分发"),
    ("gather", r"(?<!-)\bgather(s|ed|ing)?\b(?! its batch)", r"(?<!全)收集"),
    ("reduce", r"(?<!-)\breduc(e|es|ed|ing|tion)\b(?!-)", r"(?<!全)(?<!规)归约(?!-)"),
    ("all-reduce", r"(?<!ring )\ball-reduces?\b", r"(?<!环形)全归约"),
    ("reduce-scatter", r"reduce-scatter", r"归约-分发"),
    ("all-gather", r"all-gather", r"全收集"),
    ("all-to-all", r"all-to-all", r"全交换"),
    ("ring-all-reduce", r"ring all-reduce", r"环形全归约"),
    ("chunk", r"\bchunks?\b", r"块（chunk）"),
    ("halving-doubling", r"halving-doubling", r"减半-倍增"),
    ("recursive-doubling", r"recursive doubling", r"递归倍增"),
    ("tree", r"\btrees?\b(?! all)", r"树形"),
    ("bucket", r"(?<!first )\bbuckets?\b(?! cap)", r"(?<!第一个)桶(?!容量)(?!上限)"),
    ("bucket-cap", r"bucket cap", r"桶容量|桶上限"),
    ("first-bucket", r"first bucket", r"第一个桶"),
    ("overlap", r"\boverlap(s|ped|ping)?\b", r"重叠"),
    ("backward-hook", r"\bhooks?\b", r"钩子"),
    ("forward-backward", r"\bbackward\b|\bforward\b", r"反向传播|前向"),
    ("gloo", r"(?-i:\bGloo\b)", r"Gloo"),
    ("nccl", r"(?-i:\bNCCL\b)", r"NCCL"),
    ("grpc", r"\bgRPC\b", r"gRPC"),
    ("protobuf-framing", r"\bprotobuf\b|\bframing\b", r"protobuf"),
    ("alpha-beta-model", r"alpha-beta", r"alpha-beta"),
    ("alpha", r"\balpha\b(?!-)", r"alpha(?!-)"),
    ("beta", r"(?<!-)\bbeta\b", r"(?<!-)beta"),
    ("latency", r"\blatency\b", r"(?<!有界)延迟(?!同步)"),
    ("bandwidth", r"(?<!bus )(?<!algorithm )\bbandwidth\b", r"带宽"),
    ("busbw-algbw", r"\bbusbw\b|\balgbw\b|bus bandwidth", r"busbw|algbw"),
    ("nic", r"(?-i:\bNIC\b)", r"NIC|网卡"),
    ("loopback", r"\bloopback\b", r"回环"),
    ("speedup", r"\bspeedups?\b", r"加速比"),
    ("efficiency", r"\befficiency\b", r"效率"),
    ("weak-scaling", r"weak scaling", r"弱扩展"),
    ("strong-scaling", r"strong scaling", r"强扩展"),
    ("throughput", r"samples/s|samples per second|\bthroughput\b", r"每秒样本数|吞吐"),
    ("cost-model", r"cost model", r"代价模型"),
    ("calibration", r"\bcalibrat(e|es|ed|ing|ion)\b", r"标定"),
    ("emulated-node", r"emulated nodes?", r"模拟节点"),
    ("cpu-share", r"CPU shares?|node's share", r"CPU 份额"),
    ("time-dilation", r"\bdilation\b", r"时间膨胀|dilation"),
    ("cluster-profile", r"cluster profiles?|\bthe cluster\b|\bcluster `", r"集群配置"),
    ("timeline", r"\btimelines?\b", r"时间线"),
    ("trace", r"\btraces?\b", r"trace"),
    ("span", r"\bspans?\b", r"(?<!键)区间|span"),
    ("flow", r"\bflows?\b", r"flow"),
]

DOCS = ["tutorial.md", "tutorial.zh.md", "labs/*.md"]
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]*)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def compile_term(pattern):
    return re.compile(pattern, re.IGNORECASE)


def anchors(path):
    if not os.path.exists(path):
        return None
    return ANCHOR.findall(open(path, encoding="utf-8").read())


def prose(path):
    """The file's text with fenced code blocks and headings blanked (same offsets)."""
    out, in_block = [], False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_block = not in_block
            out.append(" " * (len(line) - 1) + "\n" if line.endswith("\n") else " " * len(line))
            continue
        if in_block or re.match(r"#+\s", line):
            out.append(re.sub(r"[^\n]", " ", line))
        else:
            out.append(line)
    return "".join(out)


def glossary_links(text):
    """[(start, end, target file, slug)] of links into a glossary."""
    out = []
    for m in LINK.finditer(text):
        target = m.group(2)
        g = re.match(r"(?:\.\./)?(glossary(?:\.zh)?\.md)#(.+)$", target)
        if g:
            out.append((m.start(), m.end(), g.group(1), g.group(2)))
    return out


def masked(text, links):
    """Ranges not to search in: inline code and every link (text and target)."""
    ranges = [(s, e) for s, e, _, _ in links]
    for m in LINK.finditer(text):
        ranges.append((m.start(), m.end()))
    for m in re.finditer(r"`[^`\n]*`", text):
        ranges.append((m.start(), m.end()))
    for m in re.finditer(r"<[^>\n]*>", text):
        ranges.append((m.start(), m.end()))
    return ranges


def inside(pos, ranges):
    return any(s <= pos < e for s, e in ranges)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    docs = sys.argv[1]
    failures = []
    slugs = [t[0] for t in TERMS]
    if len(set(slugs)) != len(slugs):
        failures.append("TERMS lists a slug twice")
    have = {}
    for g in ("glossary.md", "glossary.zh.md"):
        a = anchors(os.path.join(docs, g))
        if a is None:
            failures.append("%s is missing" % g)
            a = []
        have[g] = set(a)
        for s in slugs:
            if s not in have[g]:
                failures.append("%s has no entry (anchor) for term '%s'" % (g, s))
        for s in a:
            if s not in slugs:
                failures.append("%s has an entry '%s' that is not in TERMS" % (g, s))
        dup = sorted(set(x for x in a if a.count(x) > 1))
        if dup:
            failures.append("%s has anchors twice: %s" % (g, ", ".join(dup)))
    files = []
    for d in DOCS:
        files += sorted(glob.glob(os.path.join(docs, d)))
    for path in files:
        name = os.path.relpath(path, docs)
        zh = path.endswith(".zh.md")
        text = prose(path)
        links = glossary_links(text)
        for s, e, g, slug in links:
            want = "glossary.zh.md" if zh else "glossary.md"
            if g != want:
                failures.append("%s links to %s#%s; its glossary is %s" % (name, g, slug, want))
            if slug not in have.get(g, ()):
                failures.append("%s links to %s#%s, which has no such anchor" % (name, g, slug))
        skip = masked(text, links)
        for slug, en, zh_pattern in TERMS:
            first_link = min([s for s, _, _, sl in links if sl == slug], default=None)
            patterns = [compile_term(en)] + ([re.compile(zh_pattern)] if zh and zh_pattern else [])
            first_plain = None
            for p in patterns:
                for m in p.finditer(text):
                    if not inside(m.start(), skip):
                        if first_plain is None or m.start() < first_plain[0]:
                            first_plain = (m.start(), m.group(0))
                        break
            if first_plain is None:
                continue
            if first_link is None or first_link > first_plain[0]:
                line = text.count("\n", 0, first_plain[0]) + 1
                failures.append("%s:%d: first use of '%s' (%r) is not linked to the glossary"
                                % (name, line, slug, first_plain[1]))
    if failures:
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1)
    print("PASS: %d terms, %d docs" % (len(TERMS), len(files)))


if __name__ == "__main__":
    main()

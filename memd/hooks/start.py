"""The file `memd hooks install` has Claude Code run: ``<venv python> -I -S <this file>`` (docs/hooks.md).

A lean start: no ``site`` (its .pth files, the editable finder), no PYTHON* variables, no user site, no
script or working folder on sys.path. This file is compiled at every start (a script gets no .pyc),
so it only appends the folder that holds the ``memd`` package (site-packages, or the checkout of an
editable install) to sys.path, with string operations on its own path, and hands over.
"""

import sys

if __name__ == "__main__":
    _here = __file__
    for _ in range(3):  # .../<folder>/memd/hooks/start.py -> .../<folder>
        _here = _here[:max(_here.rfind("/"), _here.rfind("\\"))]
    sys.path.append(_here)  # after the standard library: nothing in it may shadow a standard module

    from memd.hooks.entry import start

    raise SystemExit(start())

"""Dependencies run one way: runtime code never imports the testing helpers, the benchmark never imports the tests,
and the package imports nothing it doesn't declare.

Imports are read from the source with `ast`, relative ones resolved, so a moved or renamed import is still seen and
an import named in a docstring or a comment is not. Each failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
import importlib.metadata
import io
import re
import sys
import tokenize
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from inline_snapshot import snapshot
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / 'pydantic_ai_append'
PLUGIN = ROOT / 'pytest_pydantic_ai_append'

OPTIONAL_IMPORTS = {
    ('pydantic_ai_append/guard/_wire_refusal.py', 'anthropic'),
    ('pydantic_ai_append/_check/cassettes.py', 'yaml'),
    ('pydantic_ai_append/_store/redis.py', 'redis'),
    *(('pydantic_ai_append/_wire/encoding.py', name) for name in ('brotli', 'brotlicffi', 'zstandard')),
}
"""Third-party modules the package may import without declaring them, each only where its absence is handled.

The verifier gives a request to the Anthropic API an error type the Anthropic SDK lets through, if that SDK is
installed; without it, no request came from it, and the plain error is used. So `anthropic` is imported inside
`try: ... except ImportError:`, and is not a dependency. The cassette checker reads YAML cassettes with PyYAML,
which the `testing` extra declares (`test_pyyaml_and_inline_snapshot_are_the_testing_extra`); without it the checker says what to
install, and JSON cassettes still work. The wire wing's decoding (`_wire/encoding`, which the checker, the verifier
and the fixture share) reads `br` and `zstd` bodies with brotli (or brotlicffi) and zstandard, also in that extra,
imported only when such a body is read. `RedisRecordStore` imports the `redis` package, which the `redis` extra declares,
when a store is made, and says which extra to install when it is missing.
"""

LOADED_IMPORTS = {('pydantic_ai_append/_wire/legacy_httpx.py', 'httpx')}
"""Third-party modules the package imports undeclared in a module of its own that is imported only once the caller
has handed over an object of theirs, so they are installed: the wrappers for clients of `httpx` (which the Groq,
Cohere and Hugging Face SDKs take), which `_wire/transport.py` imports only for an `httpx` transport or client class,
told by `sys.modules`."""


@dataclass(frozen=True)
class Import:
    """One module an import statement names, with a relative name resolved."""

    file: str
    """The importing file, relative to the repository root."""
    line: int
    module: str
    """The absolute dotted name. For `from a import b`, both `a` and `a.b` (which may be a submodule) are listed."""
    runtime: bool
    """False under `if TYPE_CHECKING:`."""
    optional: bool
    """True inside the body of a `try` that handles `ImportError`."""

    def __str__(self) -> str:
        return f'{self.file}:{self.line} imports {self.module}'


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def handles_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(name, ast.Name) and name.id in ('ImportError', 'ModuleNotFoundError') for name in caught)


def imports_of(path: Path) -> list[Import]:
    """Every import in a file, at any depth (a function body too), with where it sits."""
    file = path.relative_to(ROOT).as_posix()
    package = module_name(path).split('.')
    if path.name != '__init__.py':
        package = package[:-1]
    found: list[Import] = []

    def record(node: ast.Import | ast.ImportFrom, runtime: bool, optional: bool) -> None:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = package[: len(package) - node.level + 1] if node.level else []
            module = '.'.join([*base, *([node.module] if node.module else [])])
            names = [module, *(f'{module}.{alias.name}' for alias in node.names if alias.name != '*')]
        found.extend(Import(file, node.lineno, name, runtime, optional) for name in names)

    def walk(nodes: list[ast.stmt] | list[ast.AST], runtime: bool, optional: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                record(node, runtime, optional)
            elif isinstance(node, ast.If) and is_type_checking(node.test):
                walk(node.body, False, optional)
                walk(node.orelse, runtime, optional)
            elif isinstance(node, ast.Try | ast.TryStar):
                walk(node.body, runtime, optional or any(handles_import_error(h) for h in node.handlers))
                walk([*node.handlers, *node.orelse, *node.finalbody], runtime, optional)
            else:
                walk(list(ast.iter_child_nodes(node)), runtime, optional)

    walk(ast.parse(path.read_text(), str(path)).body, True, False)
    return found


def files_under(directory: Path) -> Iterator[Path]:
    return (path for path in sorted(directory.rglob('*.py')) if '__pycache__' not in path.parts)


def is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(f'{package}.')


def test_imports_are_read_as_python_reads_them():
    # The checks below rest on this reading, so it is pinned on real files: relative imports resolved (and the
    # import in the module docstring's example not read), and the one import whose absence is handled.
    testing = imports_of(PACKAGE / 'testing' / '__init__.py')
    assert [
        found.module
        for found in testing
        if '._' in found.module and (ROOT / f'{found.module.replace(".", "/")}.py').exists()
    ] == snapshot(
        [
            'pydantic_ai_append._wire.conversation',
            'pydantic_ai_append._wire.segments',
            'pydantic_ai_append.testing._assertions',
            'pydantic_ai_append.testing._capture',
            'pydantic_ai_append.testing._prompt_wire',
            'pydantic_ai_append.testing._transcript',
        ]
    )
    wire = imports_of(PACKAGE / 'guard' / '_wire_refusal.py')
    assert [(found.runtime, found.optional) for found in wire if found.module == 'anthropic'] == snapshot(
        [(True, True)]
    )


def test_runtime_code_never_imports_the_testing_helpers():
    offending = [
        str(found)
        for path in files_under(PACKAGE)
        if not path.is_relative_to(PACKAGE / 'testing')
        for found in imports_of(path)
        if is_within(found.module, 'pydantic_ai_append.testing')
    ]
    assert offending == [], 'runtime code imports the testing helpers; move what both need into a private module'


def test_the_package_and_the_benchmark_never_import_the_tests():
    # The fake provider (`testing.fake_provider`) is in the package, which users install without the tests.
    offending = [
        str(found)
        for directory in (PACKAGE, PLUGIN, ROOT / 'benchmarks')
        for path in files_under(directory)
        for found in imports_of(path)
        if is_within(found.module, 'tests')
    ]
    assert offending == [], 'only the tests import the tests; move what is shared out of `tests/`'


def test_every_third_party_import_is_a_declared_dependency():
    pyproject = tomllib.loads((ROOT / 'pyproject.toml').read_text())
    declared = {canonicalize_name(Requirement(spec).name) for spec in pyproject['project']['dependencies']}
    providers = importlib.metadata.packages_distributions()
    undeclared: list[str] = []
    for path in files_under(PACKAGE):
        for found in imports_of(path):
            top = found.module.partition('.')[0]
            if not found.runtime or top in sys.stdlib_module_names or top == 'pydantic_ai_append':
                continue
            if found.optional and (found.file, top) in OPTIONAL_IMPORTS or (found.file, top) in LOADED_IMPORTS:
                continue
            distributions = {canonicalize_name(name) for name in providers.get(top, [])}
            if not distributions & declared:
                undeclared.append(f'{found} (provided by {sorted(distributions) or "no installed distribution"})')
    assert undeclared == [], 'the package imports what `[project].dependencies` does not declare'


def test_pyyaml_and_inline_snapshot_are_the_testing_extra():
    # Who records cassettes has vcrpy, which requires PyYAML; an agent in production needs neither, so PyYAML is an
    # extra rather than a dependency, and the checker's message names the extra. The fixture's documented test
    # snapshots its transcript with inline-snapshot (`.ci/wheel-env` runs it where only this extra is installed).
    pyproject = tomllib.loads((ROOT / 'pyproject.toml').read_text())
    extras = {
        name: sorted(canonicalize_name(Requirement(spec).name) for spec in specs)
        for name, specs in pyproject['project']['optional-dependencies'].items()
    }
    assert extras == snapshot(
        {'testing': ['brotli', 'brotlicffi', 'inline-snapshot', 'pyyaml', 'zstandard'], 'redis': ['redis']}
    )
    assert 'pydantic-ai-append[testing]' in (PACKAGE / '_check' / 'cassettes.py').read_text()
    assert pyproject['project']['scripts'] == snapshot({'pydantic-ai-append': 'pydantic_ai_append._check.cli:main'})


PRIVATE_USAGE_IGNORE = re.compile(r'pyright:\s*ignore\[[^\]]*\breportPrivateUsage\b')


def test_no_code_reads_a_private_name_of_another_module_or_class():
    # Pyright reports a private name read from another module or class; silencing it hides a dependency on what
    # its owner may change. Shared machinery goes in a private module, under a public name within the package.
    # Tests, benchmarks and examples are held to it too: they read what they test through names meant for it.
    offending = [
        f'{path.relative_to(ROOT).as_posix()}:{token.start[0]}: {token.string}'
        for directory in (
            PACKAGE,
            PLUGIN,
            ROOT / 'tests',
            ROOT / 'benchmarks',
            ROOT / 'examples',
        )
        for path in files_under(directory)
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if token.type == tokenize.COMMENT and PRIVATE_USAGE_IGNORE.search(token.string)
    ]
    assert offending == [], 'code reads a private name of another module or class; give it a public one'

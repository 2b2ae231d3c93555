"""spec.trainer.entrypoint: find the user's function, call it with spec.trainer.config, check the Recipe it returns.

"package.module:function" is imported (the working directory and PYTHONPATH first: code baked into the image, or a
volume or ConfigMap mounted as the working directory); "path/to/file.py:function" is loaded from that file
(relative to the working directory). The built-in workloads are recipes too (trainer.workloads).
"""

import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import nn

from trainer.config import TrainerConfig
from trainer.contract import TRAINER_CONFIG
from trainer.data import seed_everything
from trainer.failures import ConfigError
from trainer.recipe import Recipe, length

log = logging.getLogger(__name__)

RecipeFunction = Callable[[dict[str, Any]], Recipe]


def _problem(problem: str) -> ConfigError:
    return ConfigError(TRAINER_CONFIG, "entrypoint", problem)


def _module_from_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise _problem(f"no file {path} (working directory {Path.cwd()})")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise _problem(f"cannot load {path} as Python")
    sys.path.insert(0, str(path.resolve().parent))  # its own imports of modules beside it
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _module(name: str) -> ModuleType:
    if name.endswith(".py"):
        return _module_from_file(Path(name))
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)


def load_function(entrypoint: str) -> RecipeFunction:
    """The function an entrypoint names; a ConfigError naming the entrypoint when it cannot be had."""
    module_name, _, function_name = entrypoint.rpartition(":")
    try:
        module = _module(module_name)
    except ConfigError:
        raise
    except Exception as error:
        log.exception("importing %s failed", module_name)
        raise _problem(f"importing {module_name!r} failed: {type(error).__name__}: {error}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise _problem(f"{module_name!r} has no function {function_name!r}")
    return function  # type: ignore[no-any-return]


def _checked(recipe: object, entrypoint: str) -> Recipe:
    if not isinstance(recipe, Recipe):
        raise _problem(f"{entrypoint} returned {type(recipe).__name__}, not a trainer.recipe.Recipe")
    if not isinstance(recipe.model, nn.Module):
        raise _problem(f"{entrypoint}: Recipe.model is a {type(recipe.model).__name__}, not a torch.nn.Module")
    if not callable(recipe.optimizer):
        raise _problem(f"{entrypoint}: Recipe.optimizer must build an optimizer from parameters")
    for name in ("train_data", "eval_data"):
        data = getattr(recipe, name)
        try:
            empty = data is not None and length(data) == 0
        except TypeError as error:
            raise _problem(f"{entrypoint}: Recipe.{name}: {error}") from None
        if empty:
            raise _problem(f"{entrypoint}: Recipe.{name} is empty")
    return recipe


def build_recipe(config: TrainerConfig) -> Recipe:
    """Seed, call the entrypoint (or the built-in workload's recipe) with its config, and check the result."""
    workload = config.builtin_workload
    if workload is not None:
        from trainer.workloads import RECIPES  # noqa: PLC0415

        entrypoint, function, settings = f"workload {workload}", RECIPES[workload], config.builtin_settings()
    else:
        assert config.entrypoint is not None
        entrypoint, settings = config.entrypoint, dict(config.config or {})
        function = load_function(entrypoint)
    seed_everything(config.seed)
    try:
        recipe = function(settings)
    except Exception as error:
        log.exception("%s failed", entrypoint)
        raise _problem(f"{entrypoint} raised {type(error).__name__}: {error}") from None
    return _checked(recipe, entrypoint)

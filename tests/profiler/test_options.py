"""Engine options: precedence, autoReport.all expansion, value forms, one-line errors."""

import json

import pytest

from profiler.capture.options import OPTION_NAMES, OptionError, resolve_options
from report_format import schema
from report_format.reader import open_report
from report_format.writer import ReportWriter

NO_ENV: dict[str, str] = {}


def env(**options) -> dict[str, str]:
    return {"POPLAR_ENGINE_OPTIONS": json.dumps({k.replace("_", "."): v for k, v in options.items()})}


def test_defaults():
    o = resolve_options(None, NO_ENV)
    assert set(o.sources.values()) == {"default"}
    assert not o.auto_report_all and not o.capture_enabled
    assert o.auto_report_directory == "./report"
    assert o.execution_profile_program_run_count == 2
    assert o.allow_out_of_memory is True
    assert o.compute_instrumentation_level == "tile"
    assert not o.instrument and not o.output_graph_profile


def test_environment_beats_code_beats_default():
    code = {"autoReport.directory": "from_code", "autoReport.executionProfileProgramRunCount": 5}
    environ = {"POPLAR_ENGINE_OPTIONS": '{"autoReport.directory": "from_env"}'}
    o = resolve_options(code, environ)
    assert o.auto_report_directory == "from_env" and o.sources["autoReport.directory"] == "environment"
    assert o.execution_profile_program_run_count == 5
    assert o.sources["autoReport.executionProfileProgramRunCount"] == "code"
    assert o.sources["debug.allowOutOfMemory"] == "default"
    # Environment false beats code true.
    o = resolve_options({"debug.allowOutOfMemory": True}, {"POPLAR_ENGINE_OPTIONS": '{"debug.allowOutOfMemory":false}'})
    assert o.allow_out_of_memory is False and o.sources["debug.allowOutOfMemory"] == "environment"


def test_auto_report_all_turns_on_outputs_unless_explicitly_off():
    o = resolve_options(None, {"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"true","autoReport.directory":"./r"}'})
    assert o.output_graph_profile and o.output_execution_profile and o.output_debug_info
    assert o.instrument and o.capture_enabled
    assert o.sources["autoReport.outputGraphProfile"] == "environment"
    o = resolve_options(
        {"autoReport.outputExecutionProfile": "false"}, {"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":true}'}
    )
    assert o.output_graph_profile and o.output_debug_info
    assert not o.output_execution_profile and not o.instrument
    o = resolve_options({"autoReport.all": True, "debug.instrument": False}, NO_ENV)
    assert o.output_execution_profile and not o.instrument
    assert o.sources["autoReport.outputGraphProfile"] == "code"


def test_graph_profile_alone_enables_capture_without_instrumenting():
    o = resolve_options({"autoReport.outputGraphProfile": "true"}, NO_ENV)
    assert o.capture_enabled and o.output_graph_profile and not o.output_execution_profile and not o.instrument


@pytest.mark.parametrize(
    ("given", "canonical"),
    [("true", "true"), ("TRUE", "true"), (True, "true"), ("false", "false"), (False, "false")],
)
def test_bool_forms(given, canonical):
    assert resolve_options({"debug.instrument": given}, NO_ENV).values["debug.instrument"] == canonical


def test_int_and_enum_forms():
    o = resolve_options(None, {"POPLAR_ENGINE_OPTIONS": '{"autoReport.executionProfileProgramRunCount": 7}'})
    assert o.execution_profile_program_run_count == 7 and o.values["autoReport.executionProfileProgramRunCount"] == "7"
    o = resolve_options({"autoReport.executionProfileProgramRunCount": "10"}, NO_ENV)
    assert o.execution_profile_program_run_count == 10
    for level in ("tile", "ipu", "device", "vertex"):
        assert (
            resolve_options({"debug.computeInstrumentationLevel": level}, NO_ENV).compute_instrumentation_level == level
        )
    assert resolve_options({"debug.computeInstrumentationLevel": "IPU"}, NO_ENV).compute_instrumentation_level == "ipu"


def test_stack_size_forms():
    o = resolve_options(None, NO_ENV)
    # automatic: targets.AUTO_WORKER_STACK_BYTES / AUTO_SUPERVISOR_STACK_BYTES
    assert o.values["target.workerStackSizeInBytes"] == "auto" and (o.worker_stack_bytes, o.supervisor_stack_bytes) == (
        48,
        96,
    )
    o = resolve_options({"target.workerStackSizeInBytes": "0x200"}, env(target_supervisorStackSizeInBytes=128))
    assert (o.worker_stack_bytes, o.supervisor_stack_bytes) == (512, 128)
    assert o.values["target.workerStackSizeInBytes"] == "512"  # canonical decimal, as the report lists it
    o = resolve_options(
        {"target.supervisorStackSizeInBytes": " 0X40 ", "target.workerStackSizeInBytes": "AUTO"}, NO_ENV
    )
    assert (o.worker_stack_bytes, o.supervisor_stack_bytes) == (48, 64)
    assert resolve_options({"target.workerStackSizeInBytes": "0064"}, NO_ENV).worker_stack_bytes == 64


def test_empty_environment_variable_means_no_options():
    assert set(resolve_options(None, {"POPLAR_ENGINE_OPTIONS": "  "}).sources.values()) == {"default"}


def test_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"autoReport.directory":"x"}')
    assert resolve_options().auto_report_directory == "x"


def one_line_error(code=None, environ=NO_ENV) -> str:
    with pytest.raises(OptionError) as e:
        resolve_options(code, environ)
    message = str(e.value)
    assert "\n" not in message and message
    return message


def test_malformed_json_says_where():
    message = one_line_error(environ={"POPLAR_ENGINE_OPTIONS": '{"autoReport.all": "true",}'})
    assert "POPLAR_ENGINE_OPTIONS is not valid JSON" in message
    assert "line 1 column 27 (char 26)" in message


@pytest.mark.parametrize("text", ['["autoReport.all"]', '"true"', "3"])
def test_non_object_json(text):
    message = one_line_error(environ={"POPLAR_ENGINE_OPTIONS": text})
    assert "must be a JSON object" in message


def test_unknown_option_suggests_closest():
    message = one_line_error(environ={"POPLAR_ENGINE_OPTIONS": '{"autoReport.al": "true"}'})
    assert "unknown engine option 'autoReport.al'" in message and "did you mean 'autoReport.all'?" in message
    assert "POPLAR_ENGINE_OPTIONS" in message
    message = one_line_error({"autoreport.directory": "x"})
    assert "did you mean 'autoReport.directory'?" in message and "options given in code" in message
    message = one_line_error({"zzz": "x"})
    assert "unknown engine option 'zzz'" in message and "autoReport.all" in message  # lists the known ones


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("autoReport.all", "yes", "true or false"),
        ("autoReport.all", 1, "true or false"),
        ("autoReport.executionProfileProgramRunCount", "two", "non-negative integer"),
        ("autoReport.executionProfileProgramRunCount", -1, "non-negative integer"),
        ("autoReport.executionProfileProgramRunCount", True, "non-negative integer"),
        ("autoReport.executionProfileProgramRunCount", 2.5, "non-negative integer"),
        ("debug.computeInstrumentationLevel", "warp", "tile, ipu, device, vertex"),
        ("autoReport.directory", "", "non-empty string"),
        ("autoReport.directory", None, "non-empty string"),
        ("debug.allowOutOfMemory", [True], "true or false"),
        ("target.workerStackSizeInBytes", "0x", "auto or a number of bytes"),
        ("target.workerStackSizeInBytes", -8, "auto or a number of bytes"),
        ("target.supervisorStackSizeInBytes", 96.0, "auto or a number of bytes"),
        ("target.supervisorStackSizeInBytes", False, "auto or a number of bytes"),
        ("target.supervisorStackSizeInBytes", "0x100000000", "from 0 to 4294967295"),
        ("target.workerStackSizeInBytes", "1_000", "auto or a number of bytes"),
        ("target.workerStackSizeInBytes", "\u0665\u0661\u0662", "auto or a number of bytes"),  # Arabic-Indic 512
    ],
)
def test_bad_value_names_option_value_and_allowed(name, value, allowed):
    for code, environ in (({name: value}, NO_ENV), (None, {"POPLAR_ENGINE_OPTIONS": json.dumps({name: value})})):
        message = one_line_error(code, environ)
        assert message.startswith(f"engine option {name}: bad value {value!r}")
        assert allowed in message


def test_rows_match_schema_and_round_trip(tmp_path):
    o = resolve_options({"autoReport.all": "true"}, env(autoReport_directory="d"))
    rows = o.rows()
    assert tuple(rows) == schema.TABLES["engine_options"].column_names
    assert rows["name"] == sorted(rows["name"]) == list(OPTION_NAMES)
    with ReportWriter(tmp_path / "r") as w:
        w.write("engine_options", rows)
    back = {
        r["name"]: (r["value"], r["source"]) for r in open_report(tmp_path / "r").table("engine_options").to_pylist()
    }
    assert back["autoReport.directory"] == ("d", "environment")
    assert back["autoReport.all"] == ("true", "code")
    assert back["debug.allowOutOfMemory"] == ("true", "default")

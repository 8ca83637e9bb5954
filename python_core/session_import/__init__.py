"""Import a DSH session log as cassettes: its provider calls as a model cassette (docs/import.md).

Above the features, like ``config``: it writes the model cassette's and the tool cassette's
formats; no feature imports it.
"""

from dsh_sidecar.python_core.session_import.compaction import COMPACTION_LANE
from dsh_sidecar.python_core.session_import.generated_test import (
    ImportIOError,
    ImportTestExists,
    cassette_path,
    function_name,
    module_source,
)
from dsh_sidecar.python_core.session_import.log_calls import (
    ImportUnfaithful,
    LogCall,
    LogCalls,
    calls_of,
    merged,
    one_turn,
)
from dsh_sidecar.python_core.session_import.model import IMPORTED_HOST, ImportPrivate, model_lines, write_lines
from dsh_sidecar.python_core.session_import.override import OVERRIDE_NAME, check_override
from dsh_sidecar.python_core.session_import.profile import refuse_other_profile
from dsh_sidecar.python_core.session_import.tools import CWD_MARK, tool_lines, write_tool_lines

__all__ = [
    "COMPACTION_LANE",
    "CWD_MARK",
    "IMPORTED_HOST",
    "OVERRIDE_NAME",
    "ImportIOError",
    "ImportPrivate",
    "ImportTestExists",
    "ImportUnfaithful",
    "LogCall",
    "LogCalls",
    "calls_of",
    "cassette_path",
    "check_override",
    "function_name",
    "merged",
    "model_lines",
    "module_source",
    "one_turn",
    "refuse_other_profile",
    "tool_lines",
    "write_lines",
    "write_tool_lines",
]

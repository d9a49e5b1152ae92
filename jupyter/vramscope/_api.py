# The daemon's JSON-RPC method names and API version, mirroring daemon/api/api.go
# (the Go constants, in UPPER_SNAKE). A Go test parses this file and checks the
# method names equal Go's Methods table: keep it a plain list of NAME = "value".
API_VERSION = "1.0"

HELLO = "daemon.hello"
STATUS = "daemon.status"
PROCESS_LIST = "process.list"
SNAPSHOT_TAKE = "snapshot.take"
SNAPSHOT_IMPORT = "snapshot.import"
SNAPSHOT_LIST = "snapshot.list"
SNAPSHOT_GET = "snapshot.get"
SNAPSHOT_DELETE = "snapshot.delete"
ANALYSIS_SUMMARY = "analysis.summary"
ANALYSIS_SITES = "analysis.sites"
ANALYSIS_FLAME = "analysis.flame"
ANALYSIS_TIMELINE = "analysis.timeline"
ANALYSIS_FINDINGS = "analysis.findings"
ANALYSIS_DIFF = "analysis.diff"
ANALYSIS_WHAT_IF = "analysis.whatif"
COUNTERS_DEVICES = "counters.devices"
COUNTERS_SERIES = "counters.series"
SUBSCRIBE = "events.subscribe"

AGENT_REGISTER = "agent.register"
AGENT_CAPTURED = "agent.captured"
AGENT_TORCH = "agent.torch"
AGENT_DUMP = "agent.dump"

EVENT_AGENT_CONNECTED = "event.agent_connected"
EVENT_AGENT_GONE = "event.agent_gone"
EVENT_SNAPSHOT_STORED = "event.snapshot_stored"
EVENT_OOM_CAPTURED = "event.oom_captured"
EVENT_COUNTERS_TICK = "event.counters_tick"

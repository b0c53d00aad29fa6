"""The timetable workload kind: flows of iperf3 started, re-prioritised and rate-limited at set times."""

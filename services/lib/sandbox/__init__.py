"""The sandbox library: nsjail, configured for untrusted code (namespaces, cgroups, seccomp, rlimits, bounded
pipes), and the classification of how a run ended. Every service that reads or runs untrusted code does so
through `services.lib.sandbox.jail`: the executor (programs, the function-mode harness) and the judge (linters).
docs/sandbox.md is the threat model."""

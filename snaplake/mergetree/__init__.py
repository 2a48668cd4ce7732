"""The LSM merge tree of primary-key tables (Paimon's ``org.apache.paimon.mergetree``).

Layer (DESIGN.md §3): above ``snaplake.store``, below ``snaplake.commit``. It
holds the format-level logic of primary-key tables: the key/value Arrow
layout (:mod:`~snaplake.mergetree.kv`), the merge functions of each merge
engine (:mod:`~snaplake.mergetree.merge_function`), sorted runs, levels and
interval partitioning (:mod:`~snaplake.mergetree.sorted_run`), the streaming
k-way merge (:mod:`~snaplake.mergetree.sort_merge`), reading a bucket
(:mod:`~snaplake.mergetree.read`), universal compaction picking
(:mod:`~snaplake.mergetree.universal`) and the LSM conflict rule
(:mod:`~snaplake.mergetree.conflict`). ``docs/primary-key-tables.md`` is the
design.
"""

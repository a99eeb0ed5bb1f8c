"""Values and memory: how values are encoded (`codec`) and exceptions cross the wire
(`errors`), which functions workers know by name (`registry`, `ids`), and the memory
large objects land in (`memory`, `buffer_cache`) and is given back (`trim`).
"""

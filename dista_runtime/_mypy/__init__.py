"""The mypy plugin's halves (`dista_runtime.mypy_plugin` is its entry point): tasks and
refs as arguments (`tasks`), actor classes and handles (`actors`).
"""

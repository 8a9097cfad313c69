"""``python -m infra``: the railplan CLI."""

from infra.cli import main

if __name__ == "__main__":
    main()

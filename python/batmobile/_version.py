"""The package version: the repository's VERSION file (one number for the C++ library, the LAMMPS plugin and this
package). pyproject.toml reads it from here at build time; python/tests/test_package.py fails when the two differ."""
__version__ = "1.0.0"

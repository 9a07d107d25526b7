"""The tests mirror the product's packages (tests/utils/models/ holds utils/models/'s tests).

Every test folder is a package, so pytest puts the repository's root (not a test folder) on
sys.path and names test modules ``tests.utils.models.test_pacing`` etc.: tests/utils/ never
shadows the product's utils/, and two folders may hold files of the same name. The shared
fakes and fixtures live in tests/support/, which conftest.py puts on sys.path.
"""

"""The wheel carries libgrammard_client.so, so it is tagged for the platform
(py3-none-linux_x86_64): any Python 3 on that platform, not one ABI; the
metadata is in pyproject.toml."""

from setuptools import setup
from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(cmdclass={"bdist_wheel": PlatformWheel})

from setuptools import setup

# One import name, ecornn: the top-level folders kernels/ and layouts/ install as
# ecornn.kernels and ecornn.layouts (a top-level "kernels" would clash with another PyPI project).
setup(
    name="ecornn",
    version="0.1.0",
    description="Fast LSTM layers for NVIDIA GPUs: persistent and fused kernels, a planner, "
                "a NumPy reference, MXNet Gluon and functional APIs",
    packages=["ecornn", "ecornn.engines", "ecornn.layouts", "ecornn.kernels"],
    package_dir={"ecornn": "ecornn", "ecornn.layouts": "layouts", "ecornn.kernels": "kernels"},
    package_data={"ecornn.kernels": ["*.cu", "*.cuh"]},
    python_requires=">=3.9",
    install_requires=["numpy>=1.21"],
    extras_require={
        "gpu": ["cupy-cuda13x>=14"],
        "mxnet": ["mxnet==1.9.1"],
        "torch": ["torch>=2.1"],
        "test": ["pytest>=7", "hypothesis>=6", "ml_dtypes>=0.2"],
    },
)

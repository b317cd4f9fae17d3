resnet152 bf16 tests/plan/data/resnet152-b256-h100-bf16-s33.json 2500M 2800M 3G 3200M 3500M 4G 6G 8G 10G
resnet152 bf16 tests/plan/data/resnet152-b256-h200-bf16-s28.json
resnet152 bf16 analytic
resnet50 bf16 tests/plan/data/resnet50-b256-h100-bf16-s33.json
resnet50 fp32 tests/plan/data/resnet50-b256-h200-fp32-s7.json
resnet50 bf16 analytic
googlenet bf16 analytic
googlenet fp32 analytic
vgg16 bf16 tests/plan/data/vgg16-b256-h100-bf16.json
vgg16 bf16 analytic
vgg16 fp32 tests/plan/data/vgg16-b256-h100-fp32-s34.json
vgg16 fp32 analytic
vgg16 fp32 tests/plan/data/vgg16-b256-h100-fp32-s34.json 3G 3500M 4G 4500M 5G 6G
vgg16 bf16 tests/plan/data/vgg16-b256-h100-bf16.json 3G 3500M 4G 4500M 5G
resnet50 bf16 tests/plan/data/resnet50-b256-h100-bf16-s33.json 3G 3500M 4G
googlenet fp32 analytic 2500M 3G

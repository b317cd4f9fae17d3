# net math profile(file or analytic) [explicit budgets]
resnet152 bf16 /tmp/p/r152d.json 8G 9G 10G 11G 12G
resnet152 bf16 /tmp/p/r152.json 8G 9G 10G 11G 12G
resnet152 bf16 tests/plan/data/resnet152-b256-h100-bf16-s16.json
resnet152 bf16 tests/plan/data/resnet152-b256-h200-bf16-s28.json
resnet152 bf16 /tmp/p/r152.json
resnet152 bf16 analytic
resnet50 bf16 /tmp/p/r50.json
resnet50 fp32 tests/plan/data/resnet50-b256-h200-fp32-s7.json
resnet50 tf32 tests/plan/data/resnet50-b256-h200-tf32-s11.json
resnet50 bf16 analytic
googlenet bf16 /tmp/p/googlenet.json
googlenet bf16 analytic
googlenet fp32 analytic
vgg16 bf16 /tmp/p/vgg16.json
vgg16 bf16 tests/plan/data/vgg16-b256-h100-bf16.json
vgg16 fp32 /tmp/p/vgg16-fp32.json
vgg16 fp32 tests/plan/data/vgg16-b256-h200-fp32-s10c.json
vgg16 fp32 /tmp/s32/v4.json 8G 10G 12G 14G 16G 20G
vgg16 fp32 /tmp/s32/v1.json 8G 10G 12G 14G 16G 20G

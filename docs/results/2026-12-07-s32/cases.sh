# The sweep of lean-sweep.txt: docs/results/2026-12-07-s31/cases.sh, then these two
# (session 31 calls 4 and 1's fp32 VGG-16 profiles, s31d/ and s31a/vgg16-fp32-profile.json.xz)
vgg16 fp32 /tmp/s32/v4.json 8G 10G 12G 14G 16G 20G
vgg16 fp32 /tmp/s32/v1.json 8G 10G 12G 14G 16G 20G

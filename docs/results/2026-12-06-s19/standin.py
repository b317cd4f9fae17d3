# standin.py — the four h100-a profiles with the copy rates the --step-times
# logs measured in the iteration added as d2h_bw_busy / h2d_bw_busy: a
# STAND-IN for what the new profile measurement (cuda_profile.cu,
# time_copies_busy) would record, not a measurement of it.
# Run from the repository root: python3 docs/results/2026-12-06-s19/standin.py
import json
MiB = 1048576
D = 'docs/results/2026-12-06-s19'
# point: D2H (MiB, busy ms) from the log's "D2H: ..." line; H2D (MiB, ms)
# over the activations' copies (x's re-load is a generating kernel with
# synthetic data, labels 1 KiB): the rows the log lists (ResNet-152: the
# H2D busy time less x's 0.385 ms and the labels' ~0.006 ms)
pts = {
    'resnet50-bf16-4G':  (833, 17.760, 833, 7.451 + 0.941 + 1.861 + 3.716 + 1.868),
    'resnet152-bf16-8G': (1960, 40.212, 1960, 38.520 - (120.064 - 119.679) - 0.006),
    'vgg16-bf16-6G':     (539, 11.468, 539, 7.682 + 1.913 + 0.968),
    'vgg16-fp32-8G':     (1176, 24.701, 1176, 7.628 + 7.752 + 7.712),
}
for k, (db, dms, hb, hms) in pts.items():
    d2h = db * MiB / (dms * 1e-3)
    h2d = hb * MiB / (hms * 1e-3)
    dev = json.load(open('%s/h100-a/st-%s.profile.json' % (D, k)))['device']
    print('%-18s D2H %.2f GB/s (profile %.2f)  H2D %.2f GB/s (profile %.2f)'
          % (k, d2h / 1e9, dev['d2h_bw'] / 1e9, h2d / 1e9, dev['h2d_bw'] / 1e9))
    # the original text with the two fields added to the device object and
    # the source renamed (the rest byte for byte)
    text = open('%s/h100-a/st-%s.profile.json' % (D, k)).read()
    dev_at = text.index('"device": {')
    end = text.index('}', dev_at)
    text = (text[:end] + ', "d2h_bw_busy": %.17g, "h2d_bw_busy": %.17g' % (d2h, h2d) +
            text[end:])
    text = text.replace('"source": "measured:cuda"',
                        '"source": "standin:h100-a+iteration-rates"', 1)   # 30 characters: the field holds 31
    json.loads(text)   # still JSON
    with open('%s/standin/%s.profile.json' % (D, k), 'w') as f:
        f.write(text)

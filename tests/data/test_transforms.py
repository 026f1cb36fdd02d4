"""Image transforms: torchvision's semantics, checked by hand and against PyTorch."""
import math

import numpy as np
import pytest

import ember
from ember.data import DataError
from ember.data import transforms as T

torch = pytest.importorskip("torch")
F = torch.nn.functional


def gen(seed):
    return ember.Generator().manual_seed(seed)


def rand_image(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape, dtype=np.float32).astype(dtype)


def to_np(x):
    return x.numpy() if isinstance(x, ember.Tensor) else np.asarray(x)


class PILLike:
    """What ToTensor needs from a PIL image: NumPy can read it as (H, W, C)."""

    def __init__(self, array):
        self._array = array

    def __array__(self, dtype=None, copy=None):
        return self._array


# ToTensor / Normalize -------------------------------------------------------------------
def test_to_tensor_hwc_uint8_to_chw_float():
    img = rand_image((5, 4, 3), dtype=np.uint8)
    out = T.ToTensor()(img)
    assert isinstance(out, ember.Tensor) and out.dtype == ember.float32
    assert out.shape == (3, 5, 4)
    ref = torch.from_numpy(img).permute(2, 0, 1).float().div(255)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-7)
    assert out.numpy()[:, 0, 0].tolist() == pytest.approx((img[0, 0] / 255).tolist())


def test_to_tensor_other_inputs():
    gray = np.array([[0, 255], [51, 102]], np.uint8)
    np.testing.assert_allclose(T.ToTensor()(gray).numpy(), [[[0, 1], [0.2, 0.4]]], atol=1e-7)
    pil = PILLike(np.full((2, 3, 3), 255, np.uint8))
    assert T.ToTensor()(pil).shape == (3, 2, 3) and float(T.ToTensor()(pil).min()) == 1.0
    chw = rand_image((3, 4, 4), dtype=np.float64)
    out = T.ToTensor()(chw)
    assert out.dtype == ember.float32 and out.shape == (3, 4, 4)
    np.testing.assert_allclose(out.numpy(), chw, rtol=1e-6)
    byte_tensor = ember.tensor([[[0, 255]]], dtype=ember.uint8)
    assert T.ToTensor()(byte_tensor).tolist() == [[[0.0, 1.0]]]
    with pytest.raises(ember.EmberTypeError, match="ToTensor.*list"):
        T.ToTensor()([[1, 2]])


def test_normalize_matches_torch_and_inplace():
    x = rand_image((3, 4, 5))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    out = T.Normalize(mean, std)(ember.from_numpy(x.copy()))
    ref = (torch.from_numpy(x) - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.numpy()[1, 2, 3], (x[1, 2, 3] - 0.456) / 0.224, rtol=1e-5)
    t = ember.from_numpy(x.copy())
    same = T.Normalize(mean, std, inplace=True)(t)
    assert same is t
    np.testing.assert_allclose(t.numpy(), out.numpy(), rtol=1e-6)
    batch = np.stack([x, x])
    np.testing.assert_allclose(T.Normalize(mean, std)(batch)[1], out.numpy(), rtol=1e-6)


def test_normalize_errors():
    with pytest.raises(ember.EmberTypeError, match=r"Normalize: .*float.*uint8"):
        T.Normalize([0.5], [0.5])(ember.zeros(1, 2, 2, dtype=ember.uint8))
    with pytest.raises(DataError, match="std evaluated to zero"):
        T.Normalize([0.5], [0.0])(ember.zeros(1, 2, 2))
    with pytest.raises(ember.ShapeError, match=r"Normalize: mean has 3 values .*\(2, 2, 2\)"):
        T.Normalize([0.1, 0.2, 0.3], [1.0])(ember.zeros(2, 2, 2))


# Flips ----------------------------------------------------------------------------------
def test_flips_with_p_one_match_torch():
    x = rand_image((2, 3, 4))
    h = T.RandomHorizontalFlip(p=1.0)(ember.from_numpy(x))
    v = T.RandomVerticalFlip(p=1.0)(ember.from_numpy(x))
    np.testing.assert_array_equal(h.numpy(), torch.flip(torch.from_numpy(x), [-1]).numpy())
    np.testing.assert_array_equal(v.numpy(), torch.flip(torch.from_numpy(x), [-2]).numpy())
    hwc = rand_image((3, 4, 3), dtype=np.uint8)
    flipped = T.RandomHorizontalFlip(p=1.0)(hwc)
    assert flipped.dtype == np.uint8 and flipped.shape == (3, 4, 3)
    np.testing.assert_array_equal(flipped, hwc[:, ::-1, :])
    t = ember.from_numpy(x)
    assert T.RandomHorizontalFlip(p=0.0)(t) is t


def test_flip_rate_and_determinism():
    x = ember.tensor([[0.0, 1.0]])
    flip = T.RandomHorizontalFlip(p=0.3, generator=gen(1))
    flips = [flip(x)[0, 0].item() for _ in range(4000)]
    assert abs(np.mean(flips) - 0.3) < 0.03
    again = T.RandomHorizontalFlip(p=0.3, generator=gen(1))
    assert [again(x)[0, 0].item() for _ in range(4000)] == flips
    ember.manual_seed(5)
    a = [T.RandomHorizontalFlip()(x)[0, 0].item() for _ in range(50)]
    ember.manual_seed(5)
    assert [T.RandomHorizontalFlip()(x)[0, 0].item() for _ in range(50)] == a
    with pytest.raises(DataError, match="p should be a probability"):
        T.RandomHorizontalFlip(p=1.5)
    with pytest.raises(ember.EmberTypeError, match="generator"):
        T.RandomVerticalFlip(generator=3)


# Crops ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, torch_mode", [("constant", "constant"), ("edge", "replicate"),
                                              ("reflect", "reflect")])
def test_random_crop_padding_matches_torch(mode, torch_mode):
    x = rand_image((3, 6, 5))
    crop = T.RandomCrop((6, 5), padding=(1, 2, 3, 1), padding_mode=mode, fill=0,
                        generator=gen(3))
    i, j, h, w = T.RandomCrop.get_params(np.zeros((3, 9, 9)), (6, 5), generator=gen(3))
    out = crop(ember.from_numpy(x))
    padded = F.pad(torch.from_numpy(x)[None], (1, 3, 2, 1), mode=torch_mode)[0]
    np.testing.assert_array_equal(out.numpy(), padded[:, i:i + h, j:j + w].numpy())


def test_random_crop_symmetric_fill_and_pad_if_needed():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    out = T.RandomCrop((2, 7), padding=(2, 0), padding_mode="symmetric")(x)
    np.testing.assert_array_equal(out[0, 0], [1, 0, 0, 1, 2, 2, 1])
    out = T.RandomCrop((2, 5), padding=(1, 0), fill=(7,))(x)
    np.testing.assert_array_equal(out[0], [[7, 0, 1, 2, 7], [7, 3, 4, 5, 7]])
    rgb = np.zeros((3, 1, 1), np.float32)
    out = T.RandomCrop(3, padding=1, fill=(1, 2, 3))(rgb)
    np.testing.assert_array_equal(out[:, 0, 0], [1, 2, 3])
    assert out[1, 1, 1] == 0
    small = ember.ones(1, 2, 2)
    out = T.RandomCrop(4, pad_if_needed=True, generator=gen(0))(small)
    assert out.shape == (1, 4, 4) and float(out.sum()) == 4.0


def test_random_crop_offsets_cover_the_range_and_repeat():
    x = np.arange(10, dtype=np.float32).reshape(1, 1, 10)
    crop = T.RandomCrop((1, 3), generator=gen(0))
    starts = [int(crop(x)[0, 0, 0]) for _ in range(400)]
    assert set(starts) == set(range(8))
    crop = T.RandomCrop((1, 3), generator=gen(0))
    assert [int(crop(x)[0, 0, 0]) for _ in range(400)] == starts
    hwc = rand_image((8, 8, 3), dtype=np.uint8)
    out = T.RandomCrop(5)(hwc)
    assert out.shape == (5, 5, 3) and out.dtype == np.uint8


def test_random_crop_errors():
    with pytest.raises(DataError, match=r"RandomCrop: required crop size \(5, 5\) is larger "
                                        r"than the input image size \(3, 3\)"):
        T.RandomCrop(5)(ember.zeros(1, 3, 3))
    with pytest.raises(DataError, match="padding_mode"):
        T.RandomCrop(2, padding_mode="wrap")
    with pytest.raises(ember.ShapeError, match=r"RandomCrop: .*\(4,\)"):
        T.RandomCrop(2)(ember.zeros(4))
    with pytest.raises(DataError, match="fill has 2 values"):
        T.RandomCrop(2, padding=1, fill=(1, 2))(ember.zeros(3, 2, 2))


def test_center_crop():
    x = np.arange(25, dtype=np.float32).reshape(1, 5, 5)
    np.testing.assert_array_equal(T.CenterCrop(3)(x)[0], x[0, 1:4, 1:4])
    np.testing.assert_array_equal(T.CenterCrop((2, 4))(x)[0], x[0, 2:4, 0:4])
    np.testing.assert_array_equal(T.CenterCrop((1, 5))(ember.from_numpy(x)).numpy()[0],
                                  x[0, 2:3])
    padded = T.CenterCrop((3, 4))(np.ones((1, 1, 1), np.float32))
    np.testing.assert_array_equal(padded[0], [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]])


# Resize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, size", [((3, 8, 8), (4, 6)), ((3, 10, 7), (23, 5)),
                                         ((1, 32, 30), (17, 40)), ((2, 13, 11), (3, 2))])
@pytest.mark.parametrize("antialias", [False, True])
def test_resize_bilinear_matches_interpolate(shape, size, antialias):
    x = rand_image(shape, seed=1)
    out = T.Resize(size, antialias=antialias)(ember.from_numpy(x))
    ref = F.interpolate(torch.from_numpy(x)[None], size=size, mode="bilinear",
                        align_corners=False, antialias=antialias)[0]
    assert out.shape == ref.shape and out.dtype == ember.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=2e-6)


def test_resize_nearest_matches_interpolate():
    x = rand_image((2, 9, 14), seed=2)
    for size in [(4, 5), (20, 31), (9, 7)]:
        out = T.Resize(size, interpolation=T.InterpolationMode.NEAREST)(x)
        ref = F.interpolate(torch.from_numpy(x)[None], size=size, mode="nearest")[0]
        np.testing.assert_array_equal(out, ref.numpy())


def test_resize_sizes_and_uint8():
    assert T.Resize(4)(ember.zeros(3, 8, 16)).shape == (3, 4, 8)
    assert T.Resize(4)(ember.zeros(3, 16, 8)).shape == (3, 8, 4)
    assert T.Resize(4, max_size=6)(ember.zeros(3, 8, 16)).shape == (3, 3, 6)
    img = np.full((6, 6, 3), 200, np.uint8)
    out = T.Resize((3, 4))(img)
    assert out.shape == (3, 4, 3) and out.dtype == np.uint8 and (out == 200).all()
    ramp = np.array([[0, 10, 20, 30]], np.float32)
    np.testing.assert_allclose(T.Resize((1, 2), antialias=False)(ramp), [[5, 25]])
    with pytest.raises(DataError, match="interpolation"):
        T.Resize(4, interpolation="bicubic")
    with pytest.raises(DataError, match="max_size"):
        T.Resize((4, 4), max_size=8)


# Rotation -------------------------------------------------------------------------------
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("angle, k", [(90, 1), (180, 2), (-90, 3), (270, 3)])
def test_rotation_by_right_angles_matches_rot90(interpolation, angle, k):
    x = rand_image((2, 6, 6), seed=3)
    out = T.RandomRotation((angle, angle), interpolation=interpolation)(ember.from_numpy(x))
    ref = torch.rot90(torch.from_numpy(x), k, dims=(-2, -1))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-5)
    rect = rand_image((1, 4, 7), seed=4)
    out = T.RandomRotation((180, 180), interpolation=interpolation)(rect)
    np.testing.assert_allclose(out, rect[:, ::-1, ::-1], atol=1e-5)


def test_rotation_expand_holds_the_whole_image():
    x = rand_image((1, 4, 6), seed=5)
    out = T.RandomRotation((90, 90), expand=True)(x)
    assert out.shape == (1, 6, 4)
    np.testing.assert_array_equal(out, np.rot90(x, 1, axes=(-2, -1)))


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("angle", [37.0, -61.0])
def test_rotation_matches_grid_sample(interpolation, angle):
    # On a square image torchvision's rotation is grid_sample over affine_grid's rotation;
    # bilinear then multiplies by the sampled in-bounds mask (fill 0).
    n = 9
    x = rand_image((2, n, n), seed=6)
    out = T.RandomRotation((angle, angle), interpolation=interpolation)(x)
    r = math.radians(-angle)
    theta = torch.tensor([[[math.cos(r), math.sin(r), 0.0], [-math.sin(r), math.cos(r), 0.0]]])
    grid = F.affine_grid(theta, (1, 2, n, n), align_corners=False)
    ref = F.grid_sample(torch.from_numpy(x)[None], grid, mode=interpolation,
                        padding_mode="zeros", align_corners=False)[0]
    if interpolation == "bilinear":
        ref = ref * F.grid_sample(torch.ones(1, 1, n, n), grid, mode="bilinear",
                                  padding_mode="zeros", align_corners=False)[0]
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-5)


def test_rotation_fill_center_and_determinism():
    ones = np.ones((3, 5, 5), np.float32)
    out = T.RandomRotation((45, 45), fill=(2, 3, 4))(ones)
    np.testing.assert_array_equal(out[:, 0, 0], [2, 3, 4])
    assert (out[:, 2, 2] == 1).all()
    x = np.zeros((1, 3, 3), np.float32)
    x[0, 0, 1] = 1.0
    # about the top-left pixel's centre (0.5, 0.5): (row 0, col 1) goes to (row 1, col 0)
    out = T.RandomRotation((90, 90), center=(0.5, 0.5))(x)
    assert out[0, 1, 0] == 0 and out[0].sum() == 0
    out = T.RandomRotation((-90, -90), center=(0.5, 0.5))(x)
    assert out[0, 1, 0] == 1.0 and out[0].sum() == 1.0
    img = rand_image((3, 8, 8), seed=7, dtype=np.uint8)
    a = T.RandomRotation(30, generator=gen(9))(img)
    b = T.RandomRotation(30, generator=gen(9))(img)
    assert a.dtype == np.uint8 and a.shape == (3, 8, 8)
    np.testing.assert_array_equal(a, b)
    assert T.RandomRotation.get_params((-10, 10), gen(0)) == T.RandomRotation.get_params(
        (-10, 10), gen(0))
    with pytest.raises(DataError, match="non-negative"):
        T.RandomRotation(-5)


# RandomResizedCrop ----------------------------------------------------------------------
def test_random_resized_crop_box_bounds_and_determinism():
    img = np.zeros((3, 40, 60), np.float32)
    g = gen(11)
    for _ in range(200):
        i, j, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3), g)
        assert 0 <= i and i + h <= 40 and 0 <= j and j + w <= 60
        assert 0.08 * 2400 * 0.8 <= h * w <= 2400
        assert 3 / 4 * 0.8 <= w / h <= 4 / 3 * 1.25
    a = T.RandomResizedCrop(16, generator=gen(4))(img + np.arange(60, dtype=np.float32))
    b = T.RandomResizedCrop(16, generator=gen(4))(img + np.arange(60, dtype=np.float32))
    assert a.shape == (3, 16, 16)
    np.testing.assert_array_equal(a, b)


def test_random_resized_crop_fallback_is_central_crop():
    wide = np.arange(400, dtype=np.float32).reshape(1, 10, 40)
    # an area of 2-3 times the image never fits: after 10 tries, the central crop
    # clamped to the largest ratio: h = 10, w = round(10 * 4 / 3) = 13
    box = T.RandomResizedCrop.get_params(wide, (2.0, 3.0), (3 / 4, 4 / 3), gen(0))
    assert box == (0, 13, 10, 13)
    tall = np.zeros((1, 40, 10), np.float32)
    assert T.RandomResizedCrop.get_params(tall, (2.0, 3.0), (3 / 4, 4 / 3), gen(0)) == (
        13, 0, 13, 10)
    out = T.RandomResizedCrop((5, 6), scale=(2.0, 3.0), generator=gen(0))(wide)
    ref = F.interpolate(torch.from_numpy(wide[:, :, 13:26])[None], size=(5, 6),
                        mode="bilinear", align_corners=False, antialias=True)[0]
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-4)
    whole = T.RandomResizedCrop(8, scale=(1.0, 1.0), ratio=(1.0, 1.0),
                                interpolation="nearest")(np.arange(64.0).reshape(1, 8, 8))
    np.testing.assert_array_equal(whole, np.arange(64.0).reshape(1, 8, 8))


# ColorJitter ----------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [0.3, 1.7])
def test_color_jitter_brightness_and_contrast_match_torch_formulas(factor):
    x = rand_image((3, 5, 6), seed=8)
    t = torch.from_numpy(x)
    out = T.ColorJitter(brightness=(factor, factor))(ember.from_numpy(x))
    np.testing.assert_allclose(out.numpy(), (t * factor).clamp(0, 1).numpy(), atol=1e-6)
    out = T.ColorJitter(contrast=(factor, factor))(ember.from_numpy(x))
    gray = 0.2989 * t[0] + 0.587 * t[1] + 0.114 * t[2]
    ref = (factor * t + (1 - factor) * gray.mean()).clamp(0, 1)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-6)
    out = T.ColorJitter(contrast=(factor, factor))(x[:1])
    ref = (factor * t[:1] + (1 - factor) * t[:1].mean()).clamp(0, 1)
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-6)


def test_color_jitter_uint8_saturation_hue_and_order():
    img = np.array([[[100, 200, 50]]], np.uint8)  # (1, 1, 3) HWC
    out = T.ColorJitter(brightness=(0.5, 0.5))(img)
    assert out.dtype == np.uint8 and out.tolist() == [[[50, 100, 25]]]
    out = T.ColorJitter(brightness=(1.5, 1.5))(img)
    assert out.tolist() == [[[150, 255, 75]]]  # clamped at 255, 0.5 * 50 * 3 truncated
    gray = T.ColorJitter(saturation=(0.0, 0.0))(np.array([[[1.0]], [[0.0]], [[0.0]]],
                                                         np.float32))
    np.testing.assert_allclose(gray[:, 0, 0], [0.2989] * 3, atol=1e-6)
    red = np.array([[[1.0]], [[0.0]], [[0.0]]], np.float32)
    green = T.ColorJitter(hue=(1 / 3, 1 / 3))(red)
    np.testing.assert_allclose(green[:, 0, 0], [0, 1, 0], atol=1e-5)
    x = rand_image((3, 4, 4), seed=9)
    np.testing.assert_allclose(T.ColorJitter(hue=(0.0, 0.0))(x), x)
    jitter = T.ColorJitter(0.4, 0.4, 0.4, 0.1, generator=gen(2))
    order, b, c, s, h = T.ColorJitter.get_params(jitter.brightness, jitter.contrast,
                                                 jitter.saturation, jitter.hue, gen(2))
    assert sorted(order) == [0, 1, 2, 3]
    assert 0.6 <= b <= 1.4 and 0.6 <= c <= 1.4 and 0.6 <= s <= 1.4 and -0.1 <= h <= 0.1
    np.testing.assert_array_equal(jitter(x), T.ColorJitter(0.4, 0.4, 0.4, 0.1,
                                                           generator=gen(2))(x))
    assert T.ColorJitter().brightness is None
    with pytest.raises(ember.ShapeError, match=r"ColorJitter: .*1 or 3 channels.*\(2, 4, 4\)"):
        T.ColorJitter(brightness=0.5)(np.zeros((2, 4, 4), np.float32))
    with pytest.raises(DataError, match="hue"):
        T.ColorJitter(hue=0.7)


# RandomErasing --------------------------------------------------------------------------
def test_random_erasing_erases_one_rectangle():
    g = gen(6)
    for _ in range(50):
        out = T.RandomErasing(p=1.0, value=(1, 2, 3), generator=g)(ember.zeros(3, 20, 30))
        arr = out.numpy()
        rows, cols = np.nonzero(arr[0])
        h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        assert len(rows) == h * w  # a filled rectangle
        assert 0.02 * 600 * 0.7 <= h * w <= 0.33 * 600 * 1.3
        np.testing.assert_array_equal(arr[1][arr[0] > 0], 2)
        np.testing.assert_array_equal(arr[2][arr[0] > 0], 3)


def test_random_erasing_value_random_inplace_p_and_determinism():
    x = ember.zeros(3, 16, 16)
    out = T.RandomErasing(p=1.0, value="random", generator=gen(1))(x)
    assert float(x.abs().sum()) == 0.0 and float(out.abs().sum()) > 0.0
    again = T.RandomErasing(p=1.0, value="random", generator=gen(1))(x)
    np.testing.assert_array_equal(out.numpy(), again.numpy())
    y = ember.zeros(3, 16, 16)
    same = T.RandomErasing(p=1.0, value=5, inplace=True)(y)
    assert same is y and float(y.max()) == 5.0
    assert T.RandomErasing(p=0.0)(x) is x
    erase = T.RandomErasing(p=0.25, value=1, generator=gen(3))
    rate = np.mean([float(erase(x).sum()) > 0 for _ in range(2000)])
    assert abs(rate - 0.25) < 0.04
    with pytest.raises(DataError, match="value has 2 values"):
        T.RandomErasing(p=1.0, value=(1, 2))(x)
    with pytest.raises(DataError, match="'random'"):
        T.RandomErasing(value="noise")
    with pytest.raises(ember.ShapeError, match="RandomErasing"):
        T.RandomErasing(p=1.0)(ember.zeros(4, 4))


# Composition ----------------------------------------------------------------------------
def test_compose_lambda_pipeline_is_deterministic_under_manual_seed():
    img = rand_image((32, 32, 3), seed=10, dtype=np.uint8)
    pipeline = T.Compose([
        T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.RandomRotation(10),
        T.ColorJitter(0.3, 0.3, 0.3, 0.05), T.ToTensor(),
        T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)), T.RandomErasing(),
        T.Lambda(lambda t: t * 2)])
    ember.manual_seed(0)
    first = [pipeline(img).numpy() for _ in range(5)]
    ember.manual_seed(0)
    second = [pipeline(img).numpy() for _ in range(5)]
    assert first[0].shape == (3, 24, 24) and first[0].dtype == np.float32
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])
    assert "RandomResizedCrop" in repr(pipeline) and "Lambda()" in repr(pipeline)
    with pytest.raises(ember.EmberTypeError, match="Lambda"):
        T.Lambda(3)
    with pytest.raises(ember.EmberTypeError, match="Compose"):
        T.Compose([1])

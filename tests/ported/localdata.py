"""Local stand-ins for the downloads of the ported programs: numpy arrays only, the same under
either library. Digits come from scikit-learn's bundled 8x8 set, scaled up to MNIST's size."""
import numpy as np

TEXT = """\
The lighthouse keeper wrote the weather into his book every evening, in the same small hand,
whether the sea was calm or whether the waves climbed the rocks and hammered at the door.
Wind from the west, rain by midnight, three ships passing north. Nobody read the book, and he
knew it, but he wrote it all the same, because a day that is written down is a day that stays.
In the spring the gulls came back and quarrelled on the roof, and the keeper's daughter counted
them from the window: forty on Monday, fifty on Tuesday, too many to count by the end of the
week. She wanted to be a sailor. He wanted her to be anything that kept its feet on the land.
When the new lamp arrived from the city it came in eleven crates, with a manual that nobody
could follow, and the two of them spent a month of evenings putting it together on the floor
of the kitchen, arguing about which bolt went where and laughing when a piece was left over.
The light it made was whiter than the old one and reached much further out to sea. Ships that
had never seen the island before now steered around it in the dark, and the keeper wrote that
down too: a new light, a longer reach, a quieter night for everyone out on the water.
"""


def digits(count, size=28, start=0):
    """`count` digit images (float32 in [0, 1], shape (count, size, size)) and their labels."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = data.images[start:start + count].astype(np.float32) / 16.0
    scale = size // 8
    images = images.repeat(scale, axis=1).repeat(scale, axis=2)
    pad = (size - 8 * scale) // 2
    images = np.pad(images, ((0, 0), (pad, size - 8 * scale - pad), (pad, size - 8 * scale - pad)))
    return images, data.target[start:start + count].astype(np.int64)


def images(count, channels, size, seed):
    """Smooth random images in [-1, 1], products of waves: float32 (count, channels, size, size)."""
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, 1.0, size, dtype=np.float32)
    freq = rng.uniform(1.0, 4.0, (count, channels, 2, 1, 1)).astype(np.float32)
    phase = rng.uniform(0.0, 6.0, (count, channels, 2, 1, 1)).astype(np.float32)
    waves = np.sin(freq[:, :, 0] * grid[:, None] * 6 + phase[:, :, 0]) * \
        np.cos(freq[:, :, 1] * grid[None, :] * 6 + phase[:, :, 1])
    return waves.astype(np.float32)

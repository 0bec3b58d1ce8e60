"""Unit tests of informer_sidecar.backoff.Backoff (no waiting: the delays
are computed, not slept)."""

import unittest

from informer_sidecar.backoff import Backoff


class BackoffTest(unittest.TestCase):

    def test_doubles_up_to_the_maximum_with_jitter_bounds(self):
        high = Backoff(0.1, 0.5, rand=lambda: 0.999999)
        low = Backoff(0.1, 0.5, rand=lambda: 0.0)
        caps = [0.1, 0.2, 0.4, 0.5, 0.5]
        for n, cap in enumerate(caps, start=1):
            self.assertAlmostEqual(low.next_delay(), cap / 2)
            self.assertAlmostEqual(high.next_delay(), cap, places=5)
            self.assertEqual(low.failures, n)

    def test_reset_starts_over(self):
        b = Backoff(1.0, 30.0, rand=lambda: 0.5)
        self.assertAlmostEqual(b.next_delay(), 0.75)
        self.assertAlmostEqual(b.next_delay(), 1.5)
        b.reset()
        self.assertEqual(b.failures, 0)
        self.assertAlmostEqual(b.next_delay(), 0.75)
        self.assertEqual(b.failures, 1)

    def test_bad_bounds_are_refused(self):
        with self.assertRaises(ValueError):
            Backoff(0, 1)
        with self.assertRaises(ValueError):
            Backoff(2, 1)


if __name__ == "__main__":
    unittest.main()

"""A text-line recognizer, the CRNN + CTC reproduction check of the specification.

`lines` makes the data (handwritten digit strings and printed receipt lines, from what packages
ship), `model` the recognizer, its decoding and the character error rate, and `__main__` the
training job: `onemodel-crnn` or `python -m onemodel.examples.crnn`.
"""

"""General prompts shipped with qatune, for keeping what a base model knew.

PROBES: general questions with the words a right answer holds. Before a job trains, the
base's answers to them are recorded; the ones it answers right are what it knew, and the
forgetting meter (training/forgetting.py) asks the tuned model them again. A base that
answers none (builtin:tiny, whose weights are random) knew nothing to keep.

REPLAY: everyday instructions whose base answers are mixed into training (the base's own
words as targets), so that what the adapter learns for the FAQ does not overwrite how the
model answers everything else.

Both are kept apart from the benchmark's own questions (bench/data/general.json), which
measure the outcome: the meter and the replay are not tuned to the measurement.
"""

from dataclasses import dataclass

BROKEN_BELOW = 0.8  # of what the model knew: below this, a job says it broke the model
KEEP_ANSWERS_AT_LEAST = 0.95  # of a fine-tuned model's answers, trained further: the promise


@dataclass(frozen=True)
class Probe:
    question: str
    facts: tuple[str, ...]  # one of these, in the answer, makes it right


PROBES: tuple[Probe, ...] = (
    Probe("What is the capital of England?", ("London",)),
    Probe("What is the capital of Russia?", ("Moscow",)),
    Probe("What is the capital of China?", ("Beijing",)),
    Probe("What is the capital of Egypt?", ("Cairo",)),
    Probe("What is the capital of Greece?", ("Athens",)),
    Probe("Which planet is closest to the Sun?", ("Mercury",)),
    Probe("What is the largest mammal in the world?", ("blue whale", "whale")),
    Probe("What is the chemical symbol for water?", ("H2O", "H₂O")),
    Probe("How many minutes are in an hour?", ("60", "sixty")),
    Probe("How many sides does a triangle have?", ("3", "three")),
    Probe("What is the largest country in the world by area?", ("Russia",)),
    Probe("Who wrote the play Hamlet?", ("Shakespeare",)),
    Probe("What is the primary language spoken in Mexico?", ("Spanish",)),
    Probe("What is the freezing point of water in Celsius?", ("0", "zero")),
    Probe("Which animal is known for its long neck?", ("giraffe",)),
    Probe("What is the capital of the United States?", ("Washington",)),
    Probe("What is 7 times 8?", ("56",)),
    Probe("What is the name of the star at the center of our solar system?", ("Sun",)),
    Probe("What do caterpillars turn into?", ("butterfl", "moth")),
    Probe("What is the main gas in the air we breathe?", ("nitrogen",)),
    Probe("How many months are in a year?", ("12", "twelve")),
    Probe("What is the opposite of up?", ("down",)),
    Probe("Which fruit is yellow and curved?", ("banana",)),
    Probe("What do cows drink?", ("water",)),
    Probe("What is the capital of Portugal?", ("Lisbon",)),
    Probe("Who invented the telephone?", ("Bell",)),
    Probe("What is the color of the sky on a clear day?", ("blue",)),
    Probe("How many wheels does a bicycle have?", ("2", "two")),
    Probe("What instrument has black and white keys?", ("piano",)),
    Probe("What is the capital of India?", ("Delhi",)),
)

REPLAY: tuple[str, ...] = (
    "Give me three tips for staying focused while studying.",
    "Explain what photosynthesis is in two sentences.",
    "Write a short, friendly greeting for a new colleague.",
    "What are the benefits of drinking water?",
    "Summarize the plot of Cinderella in one sentence.",
    "How do I make a cup of tea?",
    "Name three common kitchen tools.",
    "What is a noun? Give an example.",
    "Why do leaves change color in autumn?",
    "Suggest a name for a pet goldfish.",
    "What should I pack for a day at the beach?",
    "Explain the difference between weather and climate.",
    "Write a haiku about the morning.",
    "How can I save money on groceries?",
    "What is the purpose of a seatbelt?",
    "Describe a rainbow to a child.",
    "List the primary colors.",
    "How does a thermometer work?",
    "Give an example of a polite way to decline an invitation.",
    "What are the four seasons?",
    "Why is exercise good for you?",
    "What is the difference between a lake and a river?",
    "Recommend a simple breakfast.",
    "Explain what a computer mouse is used for.",
    "How many players are on a soccer team?",
    "What does a librarian do?",
    "Translate 'thank you' into French.",
    "What is gravity?",
    "Write one sentence about friendship.",
    "How do I keep a houseplant healthy?",
    "What is the capital of Norway?",
    "Why do we need sleep?",
    # Short questions of fact, answered as the model answers them: a FAQ's questions look
    # like these, and without them the adapter learns that any question wants a FAQ answer
    "What is the capital of Kenya?",
    "How many strings does a violin have?",
    "Who discovered penicillin?",
    "What is the largest desert in the world?",
    "What language is spoken in Argentina?",
    "What is the chemical symbol for iron?",
    "How many bones are in the adult human body?",
    "Which planet has the most moons?",
    "What is the capital of Sweden?",
    "Who wrote Pride and Prejudice?",
    "What is the speed of light?",
    "How many teeth does an adult human have?",
    "What is the main ingredient in bread?",
    "Which ocean lies between Africa and Australia?",
    "What is the capital of Turkey?",
    "How many days are in a leap year?",
    "What is the largest organ of the human body?",
    "Who was the first president of the United States?",
    "What is the smallest continent?",
    "What is the boiling point of water in Fahrenheit?",
    "Which metal is liquid at room temperature?",
    "What do pandas eat?",
    "How many centimeters are in a meter?",
    "What is the capital of Peru?",
    "Which bird is a symbol of peace?",
    "What is the currency of Japan?",
    "How many players are on a basketball team?",
    "What is the name of our galaxy?",
)

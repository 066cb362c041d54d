fun main() {
    val numbers = generateSequence(::readLine)
        .flatMap { it.split(' ', '\t').asSequence() }
        .filter { it.isNotEmpty() }
        .map { it.toLong() }
        .toList()
    val n = numbers[0].toInt()
    println(numbers.drop(1).take(n).sum())
}
